"""Serving workloads: what the load generator sends, as prepared request bodies or chat sessions.

Prompts are token ids (no tokenizer needed; nothing re-tokenizes them, so cache hits are exact). Each
prompt starts with its own salt (run nonce + index), so prompts never share a prefix by accident: chained
block hashes differ from the first block on. A deliberate shared prefix (`shared_prefix` share of each
prompt) comes before the salt. Multi-turn sessions send chat messages with the whole history, so a
server's prefix cache can hit (appending text and re-tokenizing would not: field-facts' trap).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

WORKLOADS = ("long-context", "multi-turn", "cold-recovery")
SALT_TOKEN = 151_000          # a rarely used id marking the salt's start
BODY_MODULUS = 150_000


@dataclass(frozen=True)
class WorkloadSpec:
    name: str = "long-context"
    min_tokens: int = 1024           # prompt length range (tokens); multi-turn: each user message
    max_tokens: int = 1024
    shared_prefix: float = 0.0       # share of each prompt that is a prefix common to every prompt
    output_tokens: int = 64
    turns: int = 4                   # multi-turn: turns per session
    think_time_s: float = 0.0        # multi-turn: pause between turns (model seconds)
    vocab: int | None = None         # the model's vocabulary: token ids stay below it (None: 152k-class models)
    logprobs: bool = False           # completions: ask for each output token's logprob (to compare outputs)
    dataset: str | None = None       # long-context: prompts from this JSONL file instead of token ids

    @property
    def modulus(self) -> int:
        """Body token ids are 10 .. modulus + 9."""
        return BODY_MODULUS if self.vocab is None else self.vocab - 20

    def __post_init__(self):
        if self.name not in WORKLOADS:
            raise ValueError(f"unknown workload {self.name!r} (one of {', '.join(WORKLOADS)})")
        if not 1 <= self.min_tokens <= self.max_tokens:
            raise ValueError("prompt lengths: need 1 <= min <= max")
        if not 0 <= self.shared_prefix < 1:
            raise ValueError("shared prefix share must be in [0, 1)")
        if self.vocab is not None and not 256 <= self.vocab <= 10_000_000:
            raise ValueError("vocab: 256 .. 10,000,000 token ids")
        if self.dataset is not None and self.name != "long-context":
            raise ValueError("a dataset file feeds the long-context workload only")


@dataclass
class Prompt:
    """One prepared completion request: the JSON body as bytes (built once, replayed as is)."""

    path: str
    body: bytes
    prompt_tokens: int
    index: int = -1


@dataclass
class ChatSession:
    """A multi-turn conversation; `messages` grows with each user turn and each reply."""

    salt: str
    user_tokens: list[int]
    turns: int
    think_time_s: float
    output_tokens: int
    messages: list[dict] = field(default_factory=list)


class TokenText:
    """A long fixed token sequence, kept as JSON text with per-token offsets, so slicing a prompt's body
    is a string slice rather than a json.dumps of tens of thousands of ints."""

    def __init__(self, length: int, modulus: int = BODY_MODULUS):
        ids = [(7919 * i + 104_729) % modulus + 10 for i in range(length)]
        pieces = [str(t) for t in ids]
        self.offsets = [0]
        for piece in pieces:
            self.offsets.append(self.offsets[-1] + len(piece) + 1)
        self.text = ",".join(pieces) + ","

    def slice(self, start: int, end: int) -> str:
        return self.text[self.offsets[start]:self.offsets[end] - 1] if end > start else ""


def lengths(count: int, low: int, high: int) -> list[int]:
    """Evenly spread over [low, high] in a scrambled order (golden-ratio sequence): repeatable, mean exact."""
    golden = 0.6180339887498949
    return [round(low + (high - low) * (((n + 1) * golden) % 1.0)) for n in range(count)]


def salt_tokens(nonce: int, index: int, vocab: int | None = None) -> list[int]:
    if vocab is None:
        return [SALT_TOKEN + nonce % 900, (nonce // 900) % BODY_MODULUS, index % BODY_MODULUS,
                index // BODY_MODULUS]
    mod = vocab - 20   # a small vocabulary: the marker is its last id, the rest are digits base mod
    return [vocab - 1, nonce % mod + 10, (nonce // mod) % mod + 10, (nonce // mod**2) % mod + 10,
            index % mod + 10, (index // mod) % mod + 10]


def completion_prompts(spec: WorkloadSpec, count: int, nonce: int, model: str | None,
                       first_index: int = 0) -> list[Prompt]:
    """Token-id prompts: [shared prefix][salt][body]; bodies differ only after the salt, which suffices."""
    sizes = lengths(count, spec.min_tokens, spec.max_tokens)
    longest = max(sizes, default=0)
    text = TokenText(longest, spec.modulus)
    shared_ids = [(104_723 * i + 17) % spec.modulus + 10 for i in range(int(longest * spec.shared_prefix))]
    prompts = []
    for n, size in enumerate(sizes):
        prefix = shared_ids[:int(size * spec.shared_prefix)]
        salt = salt_tokens(nonce, first_index + n, spec.vocab)
        body_len = max(size - len(prefix) - len(salt), 0)
        ids_text = ",".join(str(t) for t in prefix + salt)
        if body_len:
            ids_text += "," + text.slice(0, body_len)
        head = completion_head(spec, model)
        body = json.dumps(head)[:-1] + ', "prompt": [' + ids_text + "]}"
        prompts.append(Prompt("/v1/completions", body.encode(), len(prefix) + len(salt) + body_len, first_index + n))
    return prompts


def completion_head(spec: WorkloadSpec, model: str | None) -> dict:
    """A streamed completion's fields besides the prompt: exactly output_tokens tokens, usage at the end."""
    head = {"max_tokens": spec.output_tokens, "min_tokens": spec.output_tokens, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "temperature": 0}
    if spec.logprobs:
        head["logprobs"] = 1
    if model:
        head["model"] = model
    return head


def read_dataset(path: str) -> list[str]:
    """The prompts of a JSONL file, one {"prompt": "text"} object a line (other keys ignored): the file vLLM
    bench's custom dataset and GuideLLM's json_file read too. ValueError naming file:line otherwise."""
    prompts = []
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the dataset: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prompt = json.loads(line).get("prompt")
        except (ValueError, AttributeError):
            prompt = None
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"{path}:{number}: want a JSON object with a non-empty string \"prompt\"")
        prompts.append(prompt)
    if not prompts:
        raise ValueError(f"{path}: no prompts (one {{\"prompt\": \"...\"}} object a line)")
    return prompts


def dataset_prompts(spec: WorkloadSpec, start: int, count: int, model: str | None) -> list[Prompt]:
    """Lines start .. start+count of the dataset, sent as written (no salt: the file decides what repeats);
    the prompt's token count comes from the server's usage."""
    texts = read_dataset(spec.dataset)[start:start + count]
    if len(texts) < count:
        raise ValueError(f"{spec.dataset}: {count} prompts needed from line {start + 1} on, the file has "
                         f"{start + len(texts)}")
    head = completion_head(spec, model)
    return [Prompt("/v1/completions", json.dumps({**head, "prompt": text}).encode(), 0, start + n)
            for n, text in enumerate(texts)]


def words(count: int, seed: int) -> str:
    """`count` short words (<= 4 characters: about one token each with BPE-like tokenizers)."""
    return " ".join(f"w{(seed * 7919 + i * 104_729) % 46_656:03x}"[:4] for i in range(count))


def chat_sessions(spec: WorkloadSpec, count: int, nonce: int, first_index: int = 0) -> list[ChatSession]:
    sizes = lengths(count * spec.turns, spec.min_tokens, spec.max_tokens)
    return [ChatSession(f"run{nonce}s{first_index + n}", sizes[n * spec.turns:(n + 1) * spec.turns],
                        spec.turns, spec.think_time_s, spec.output_tokens) for n in range(count)]


def chat_body(session: ChatSession, turn: int, model: str | None) -> bytes:
    """The next request of a session: the system salt first, then the whole history, then a new message."""
    if not session.messages:
        session.messages.append({"role": "system", "content": f"{session.salt} you are a coding assistant"})
    seed = zlib.crc32(session.salt.encode()) + turn
    session.messages.append({"role": "user", "content": words(session.user_tokens[turn], seed)})
    body = {"messages": session.messages, "max_tokens": session.output_tokens,
            "min_tokens": session.output_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0}
    if model:
        body["model"] = model
    return json.dumps(body).encode()
