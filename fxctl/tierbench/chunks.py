"""KV chunks for the tier benchmark (`fxctl bench tier`): real models' per-rank shapes, reproducible contents.

Not to be confused with workloads.py, the HTTP load generator's prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.kvtier.buffers import aligned_buffer
from fxctl.kvtier.config import CHUNK_TOKENS


@dataclass(frozen=True)
class ChunkShape:
    """The KV of `tokens` tokens for one rank: 2 (K and V) x layers x tokens x kv heads per rank x head dim."""

    name: str
    layers: int
    kv_heads_per_rank: int
    head_dim: int
    dtype_bytes: int
    dtype: str  # torch dtype name, for LMCache
    tokens: int = CHUNK_TOKENS

    @property
    def nbytes(self) -> int:
        return 2 * self.layers * self.tokens * self.kv_heads_per_rank * self.head_dim * self.dtype_bytes

    @property
    def lmcache_shape(self) -> tuple[int, int, int, int]:
        return (2, self.layers, self.tokens, self.kv_heads_per_rank * self.head_dim)


# Llama-3.1-8B in bf16 at TP1: 32 layers, 8 KV heads of 128 -> 32 MiB per 256-token chunk
LLAMA_8B_TP1 = ChunkShape("llama-3.1-8b bf16 tp1", 32, 8, 128, 2, "bfloat16")
# Qwen3-Coder-480B in FP8 at TP8: 62 layers, 8 KV heads / 8 ranks of 128 -> 3.875 MiB per chunk
QWEN_480B_TP8 = ChunkShape("qwen3-coder-480b fp8 tp8", 62, 1, 128, 1, "float8_e4m3fn")
SHAPES = {"32m": LLAMA_8B_TP1, "4m": QWEN_480B_TP8}


class ChunkSource:
    """Chunk i is window i % windows of a random block, stamped with i in its first 8 bytes: distinct,
    reproducible, and cheap to produce (the windows are filled once, only the stamp changes)."""

    def __init__(self, chunk_bytes: int, seed: int = 1, windows: int = 8):
        self.chunk_bytes = chunk_bytes
        rnd = _seeded_bytes(seed, chunk_bytes + windows * 4096 * 17)
        self.windows = [aligned_buffer(chunk_bytes) for _ in range(windows)]
        for w, buf in enumerate(self.windows):
            start = w * 4096 * 17
            buf[:] = rnd[start:start + chunk_bytes]

    def key(self, i: int) -> str:
        return f"bench@{self.chunk_bytes}@{i:08d}"

    def chunk(self, i: int) -> memoryview:
        """Chunk i, in a buffer that is reused (copy it before asking for chunk i + windows)."""
        buf = self.windows[i % len(self.windows)]
        buf[:8] = i.to_bytes(8, "little")
        return buf

    def matches(self, i: int, data: memoryview) -> bool:
        return bytes(data[:self.chunk_bytes]) == bytes(self.chunk(i))


def _seeded_bytes(seed: int, n: int) -> bytes:
    import random

    return random.Random(seed).randbytes(n)
