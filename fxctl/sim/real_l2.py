"""L2 through the real `fxctl.kvtier` store (`--real-tier DIR`): storage time measured, not modelled.

Chunks are written and read at a scaled-down size (the profile's chunk bytes / `scale`, page-aligned),
and each read's measured wall time is scaled back up by the same factor to model time, so this machine's
disk stands in for the L2 array at the profile's chunk size. The store's own L1 is off: the emulator
models L1 itself, and every L2 read goes to the disk (O_DIRECT where the filesystem allows it).
Reads run synchronously in the engine's step (a few MiB per request at the default scale).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from fxctl.errors import BadInput, NotImplementedYet
from fxctl.sim.profile import Profile
from fxctl.sim.tier_model import SharedLink, Transfer

DEFAULT_SCALE = 32
PAGE = 64 * 1024


class RealL2:
    """An `L2Store` over fxctl.kvtier.TierStore."""

    def __init__(self, store, chunk_bytes: float, scale: float, capacity_chunks: int):
        self.store = store
        self.model_chunk_bytes = chunk_bytes
        self.stored_bytes = max(PAGE, int(-(-chunk_bytes / scale // PAGE) * PAGE))
        self.time_factor = chunk_bytes / self.stored_bytes  # measured seconds -> model seconds
        self.capacity_chunks = capacity_chunks
        self.link = SharedLink(total_bps=1.0)  # only fixed-duration (measured) transfers go through it
        self._payload = bytes(self.stored_bytes)
        self.measured_read_s = 0.0
        self.measured_read_bytes = 0

    @staticmethod
    def key(chunk_key: bytes) -> str:
        return chunk_key.hex()

    def prefix_hits(self, keys: list[bytes]) -> int:
        return self.store.contains([self.key(k) for k in keys])

    def add(self, keys: list[bytes]) -> None:
        for chunk_key in keys:
            self.store.put(self.key(chunk_key), self._payload)

    def start_read(self, keys: list[bytes], now: float) -> Transfer:
        buffers = [bytearray(self.stored_bytes) for _ in keys]
        started = time.perf_counter()
        sizes = self.store.get_into([self.key(k) for k in keys], buffers)
        measured = time.perf_counter() - started
        self.measured_read_s += measured
        self.measured_read_bytes += sum(s or 0 for s in sizes)
        return self.link.start(len(keys) * self.model_chunk_bytes, now, duration=measured * self.time_factor)

    def clear(self) -> int:
        keys = list(getattr(self.store.l2, "index", {})) if self.store.l2 is not None else []
        for key in keys:
            self.store.remove(key)
        return len(keys)

    def chunk_count(self) -> int:
        l2 = self.store.stats().get("l2") or {}
        return int(l2.get("chunks", 0))

    def close(self) -> None:
        self.store.close()


def open_real_l2(profile: Profile, directory: Path, scale: float = DEFAULT_SCALE) -> RealL2:
    try:
        from fxctl.kvtier import TierConfig, TierStore
    except ImportError as exc:
        raise NotImplementedYet(
            "--real-tier needs fxctl.kvtier's store, which is not in this installation",
            "run without --real-tier (L2 timing is then modelled from the profile)") from exc
    from fxctl.sim.connector import tier_rates

    if profile.cost_model == "fixed":
        raise BadInput(f"{profile.path}: --real-tier needs a roofline profile (this one has fixed delays)",
                       "use e.g. --profile lab")
    rates = tier_rates(profile)
    real = RealL2(None, rates.chunk_bytes, scale, rates.l2_chunks)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(directory).free
        l2_bytes = max(real.stored_bytes * 4, min(real.stored_bytes * rates.l2_chunks, int(free * 0.8)))
        real.store = TierStore(TierConfig(l2_path=str(directory), l1_bytes=0, l2_bytes=l2_bytes,
                                          segment_bytes=min(1 << 30, l2_bytes), durable=False))
    except (OSError, RuntimeError) as exc:
        raise BadInput(f"--real-tier {directory}: {exc}", "give a writable directory no other store uses") from exc
    return real
