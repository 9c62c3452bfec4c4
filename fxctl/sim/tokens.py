"""Tokenizer-free token counting and prefix hashing: deterministic, no model files needed.

Text splits into words and punctuation; a word longer than four characters splits into four-character
pieces (roughly one token per four characters, like BPE on English). Each piece maps to a stable id.
KV blocks are keyed by a chained hash of their tokens, so equal prefixes give equal keys.
"""

from __future__ import annotations

import hashlib
import re
import struct
from array import array
from collections.abc import Iterable

VOCAB = 151_936  # Qwen3's vocabulary size: ids stay in a realistic range
PIECE = re.compile(r"\w+|[^\w\s]")
WORDS = ("the", " cache", " tier", " block", " prefix", " token", " model", " serving", " is", " hot",
         ",", " and", " cold", " read", " from", " HBM", ".", " NVMe", " fabric", " emulated")


def piece_id(piece: str) -> int:
    digest = hashlib.blake2b(piece.encode(), digest_size=8).digest()
    return struct.unpack("<Q", digest)[0] % VOCAB


def tokenize(text: str) -> list[int]:
    ids: list[int] = []
    for word in PIECE.findall(text):
        ids.extend(piece_id(word[i:i + 4]) for i in range(0, len(word), 4))
    return ids


def chat_prompt(messages: list[dict]) -> str:
    """A ChatML-style rendering: the same messages always give the same tokens (and the same prefix)."""
    parts = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|im_start|>{message.get('role', 'user')}\n{content}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def block_hashes(tokens: list[int], block_size: int) -> list[bytes]:
    """Chained hashes of every full block: block i's key depends on all tokens before it."""
    hashes: list[bytes] = []
    parent = b""
    data = memoryview(array("I", tokens).tobytes())
    step = 4 * block_size
    blake = hashlib.blake2b
    for start in range(0, 4 * (len(tokens) - block_size + 1), step):
        parent = blake(parent + data[start:start + step], digest_size=16).digest()
        hashes.append(parent)
    return hashes


def output_piece(n: int) -> str:
    """The text of the n-th generated token (deterministic filler)."""
    return WORDS[n % len(WORDS)]


def as_token_ids(prompt: str | Iterable[int]) -> list[int]:
    if isinstance(prompt, str):
        return tokenize(prompt)
    return [int(t) for t in prompt]
