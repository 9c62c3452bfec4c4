"""L1: a DRAM pool of chunks with a byte budget and segmented-LRU eviction.

New chunks enter a probation segment; a chunk hit again moves to the protected segment (at most
`protected_share` of the budget). Eviction takes probation's least recent first, so a long one-time scan
cannot push out the prefixes that were reused in the last rounds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator


class L1Chunk:
    """A chunk held in DRAM: an aligned buffer of padded size, the first `nbytes` of which are data."""

    __slots__ = ("buf", "nbytes", "meta", "in_l2")

    def __init__(self, buf: memoryview, nbytes: int, meta: bytes = b"", in_l2: bool = False):
        self.buf = buf
        self.nbytes = nbytes
        self.meta = meta
        self.in_l2 = in_l2

    @property
    def size(self) -> int:
        return len(self.buf)


class DramPool:
    def __init__(self, budget: int, protected_share: float = 0.8):
        self.budget = budget
        self.protected_budget = int(budget * protected_share)
        self._probation: OrderedDict[str, L1Chunk] = OrderedDict()
        self._protected: OrderedDict[str, L1Chunk] = OrderedDict()
        self.used = 0
        self.protected_used = 0

    def __contains__(self, key: str) -> bool:
        return key in self._probation or key in self._protected

    def __len__(self) -> int:
        return len(self._probation) + len(self._protected)

    def keys(self) -> Iterator[str]:
        yield from self._probation
        yield from self._protected

    def peek(self, key: str) -> L1Chunk | None:
        return self._probation.get(key) or self._protected.get(key)

    def touch(self, key: str) -> L1Chunk | None:
        """Look a chunk up as a hit: it becomes the most recent protected chunk."""
        chunk = self._protected.get(key)
        if chunk is not None:
            self._protected.move_to_end(key)
            return chunk
        chunk = self._probation.pop(key, None)
        if chunk is None:
            return None
        self._protected[key] = chunk
        self.protected_used += chunk.size
        while self.protected_used > self.protected_budget and len(self._protected) > 1:
            old_key, old = self._protected.popitem(last=False)
            self.protected_used -= old.size
            self._probation[old_key] = old
        return chunk

    def fits(self, size: int) -> bool:
        return size <= self.budget

    def insert(self, key: str, chunk: L1Chunk, is_pinned: Callable[[str], bool],
               protected: bool = False) -> tuple[bool, list[tuple[str, L1Chunk]]]:
        """Add a chunk, evicting unpinned ones to make room. Returns (inserted, evicted chunks)."""
        evicted: list[tuple[str, L1Chunk]] = []
        if not self.fits(chunk.size):
            return False, evicted
        old = self.remove(key)
        if old is not None:
            evicted.append((key, old))
        while self.used + chunk.size > self.budget:
            victim = self._pop_victim(is_pinned)
            if victim is None:
                return False, evicted
            evicted.append(victim)
        (self._protected if protected else self._probation)[key] = chunk
        if protected:
            self.protected_used += chunk.size
        self.used += chunk.size
        return True, evicted

    def _pop_victim(self, is_pinned: Callable[[str], bool]) -> tuple[str, L1Chunk] | None:
        for segment in (self._probation, self._protected):
            for key in segment:
                if not is_pinned(key):
                    chunk = segment.pop(key)
                    self.used -= chunk.size
                    if segment is self._protected:
                        self.protected_used -= chunk.size
                    return key, chunk
        return None

    def remove(self, key: str) -> L1Chunk | None:
        chunk = self._probation.pop(key, None)
        if chunk is None:
            chunk = self._protected.pop(key, None)
            if chunk is None:
                return None
            self.protected_used -= chunk.size
        self.used -= chunk.size
        return chunk
