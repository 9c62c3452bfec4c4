"""The KV tiers below HBM: L1 (DRAM pool) and L2 (NVMe-oF RAID0), as chunk indexes with timed transfers.

A transfer moves whole chunks (LMCache's 256-token chunks) over a shared link. Transfers in flight share
the link's bandwidth equally, and each is also capped by a per-request stream rate (one request's chunks
are read with bounded parallelism), so one request cannot use the whole array but many together can.
The L2 store sits behind `L2Store`, so the modelled store and the real `fxctl.kvtier` store are
interchangeable.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

EPS_BYTES = 1.0


@dataclass
class Transfer:
    id: int
    nbytes: float
    remaining: float
    ready_at: float | None = None  # set for transfers of known duration (measured on a real store)


class SharedLink:
    """Processor sharing with a per-stream cap: rate = min(stream_bps, total_bps / active transfers)."""

    def __init__(self, total_bps: float, stream_bps: float | None = None):
        self.total_bps = total_bps
        self.stream_bps = stream_bps or total_bps
        self.active: dict[int, Transfer] = {}
        self.clock = 0.0
        self._ids = itertools.count()

    def start(self, nbytes: float, now: float, duration: float | None = None) -> Transfer:
        self.advance(now)
        transfer = Transfer(next(self._ids), nbytes, nbytes)
        if duration is not None:
            transfer.ready_at = now + duration
        self.active[transfer.id] = transfer
        return transfer

    def rate(self) -> float:
        shared = [t for t in self.active.values() if t.ready_at is None]
        return min(self.stream_bps, self.total_bps / len(shared)) if shared else 0.0

    def next_completion(self) -> float | None:
        if not self.active:
            return None
        times = [t.ready_at for t in self.active.values() if t.ready_at is not None]
        rate = self.rate()
        shared = [t.remaining for t in self.active.values() if t.ready_at is None]
        if shared:
            times.append(self.clock + min(shared) / rate)
        return min(times)

    def advance(self, now: float) -> list[Transfer]:
        """Move the link's clock to `now`; the transfers that completed on the way."""
        done: list[Transfer] = []
        while self.active and self.clock < now:
            step_end = min(now, self.next_completion() or now)
            self._progress(step_end - self.clock)
            self.clock = step_end
            done.extend(self._pop_finished())
        self.clock = max(self.clock, now)
        done.extend(self._pop_finished())
        return done

    def _progress(self, seconds: float) -> None:
        rate = self.rate()
        for transfer in self.active.values():
            if transfer.ready_at is None:
                transfer.remaining -= rate * seconds

    def _pop_finished(self) -> list[Transfer]:
        finished = [t for t in self.active.values()
                    if (t.ready_at is None and t.remaining <= EPS_BYTES)
                    or (t.ready_at is not None and t.ready_at <= self.clock + 1e-12)]
        for transfer in finished:
            del self.active[transfer.id]
        return finished

    def reset_clock(self, now: float) -> None:
        self.advance(now)


class ChunkIndex:
    """Which chunks a tier holds, least recently used first, bounded by a chunk count."""

    def __init__(self, capacity_chunks: int):
        self.capacity = capacity_chunks
        self.keys: OrderedDict[bytes, None] = OrderedDict()
        self.evictions = 0

    def prefix_hits(self, keys: list[bytes]) -> int:
        count = 0
        for key in keys:
            if key not in self.keys:
                break
            self.keys.move_to_end(key)
            count += 1
        return count

    def add(self, keys: list[bytes]) -> None:
        if self.capacity <= 0:
            return
        for key in keys:
            self.keys[key] = None
            self.keys.move_to_end(key)
        while len(self.keys) > self.capacity:
            self.keys.popitem(last=False)
            self.evictions += 1

    def clear(self) -> int:
        dropped = len(self.keys)
        self.keys.clear()
        return dropped


class L2Store(Protocol):
    """What the engine needs from L2: prefix lookup, store, a timed read, reset."""

    link: SharedLink

    def prefix_hits(self, keys: list[bytes]) -> int: ...
    def add(self, keys: list[bytes]) -> None: ...
    def start_read(self, keys: list[bytes], now: float) -> Transfer: ...
    def clear(self) -> int: ...
    def chunk_count(self) -> int: ...


class ModelledTier:
    """A tier whose transfer time is modelled: bytes over the shared link."""

    def __init__(self, name: str, capacity_chunks: int, chunk_bytes: float, link: SharedLink):
        self.name = name
        self.index = ChunkIndex(capacity_chunks)
        self.chunk_bytes = chunk_bytes
        self.link = link

    def prefix_hits(self, keys: list[bytes]) -> int:
        return self.index.prefix_hits(keys)

    def add(self, keys: list[bytes]) -> None:
        self.index.add(keys)

    def start_read(self, keys: list[bytes], now: float) -> Transfer:
        return self.link.start(len(keys) * self.chunk_bytes, now)

    def clear(self) -> int:
        return self.index.clear()

    def chunk_count(self) -> int:
        return len(self.index.keys)
