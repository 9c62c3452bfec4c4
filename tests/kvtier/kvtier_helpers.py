"""Helpers shared by the KV tier tests."""

from __future__ import annotations

import hashlib
import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset(labels)): value}, through prometheus_client's parser."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as resp:
        return parse_samples(resp.read().decode())


def sample(found: dict, name: str, **labels) -> float:
    return found[(name, frozenset(labels.items()))]
