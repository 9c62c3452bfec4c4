"""Helpers shared by the KV tier tests."""

from __future__ import annotations

import hashlib

from fxctl.kvtier import TierConfig


def chunk_bytes(key: str, size: int, seed: int = 0) -> bytes:
    """Deterministic content of a test chunk."""
    block = hashlib.blake2b(f"{key}/{seed}".encode(), digest_size=64).digest()
    return (block * (size // 64 + 1))[:size - 8] + size.to_bytes(8, "little") if size >= 8 else block[:size]


def small_config(path: str, **kw) -> TierConfig:
    base = dict(l2_path=path, l1_bytes=1 << 20, l2_bytes=64 << 20, segment_bytes=16 << 20, io_threads=4,
                write_threads=1, max_pending_bytes=16 << 20, durable=False)
    base.update(kw)
    return TierConfig(**base)
