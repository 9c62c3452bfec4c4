"""HBM KV blocks as vLLM manages them: a fixed pool, reference counts, and a prefix cache of full blocks.

A freed block keeps its hash and stays findable until it is reused (least recently freed first), which is
what makes repeated prompts hit. `reset_prefix_cache` forgets every hash, as vLLM's endpoint does.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockPool:
    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self.ref_count = [0] * num_blocks
        self.block_hash: list[bytes | None] = [None] * num_blocks
        self.cached: dict[bytes, int] = {}
        self.free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self.free)

    def usage(self) -> float:
        return 1.0 - len(self.free) / self.num_blocks if self.num_blocks else 0.0

    def match_prefix(self, hashes: list[bytes]) -> list[int]:
        """Blocks holding the longest cached prefix of `hashes`."""
        found = []
        for h in hashes:
            block = self.cached.get(h)
            if block is None:
                break
            found.append(block)
        return found

    def can_allocate(self, reused: list[int], new: int) -> bool:
        reusable_free = sum(1 for b in reused if self.ref_count[b] == 0)
        return len(self.free) - reusable_free >= new

    def acquire(self, reused: list[int], new: int) -> list[int] | None:
        """Take the cached blocks `reused` and `new` fresh ones; None (and nothing taken) if HBM is full."""
        if not self.can_allocate(reused, new):
            return None
        for block in reused:
            self._ref(block)
        return list(reused) + self._take_free(new)

    def grow(self, count: int) -> list[int] | None:
        if len(self.free) < count:
            return None
        return self._take_free(count)

    def release(self, blocks: list[int]) -> None:
        """Drop references; blocks reaching zero become free but keep their hash (reverse order, as vLLM)."""
        ref_count, free = self.ref_count, self.free
        for block in reversed(blocks):
            ref_count[block] -= 1
            if ref_count[block] == 0:
                free[block] = None

    def register(self, blocks: list[int], hashes: list[bytes]) -> None:
        """Make full blocks findable by their hashes (a hash already cached keeps its first block)."""
        block_hash, cached = self.block_hash, self.cached
        for block, key in zip(blocks, hashes):
            if block_hash[block] is None and key not in cached:
                block_hash[block] = key
                cached[key] = block

    def reset_prefix_cache(self) -> int:
        dropped = len(self.cached)
        self.cached.clear()
        self.block_hash = [None] * self.num_blocks
        return dropped

    def _ref(self, block: int) -> None:
        if self.ref_count[block] == 0:
            self.free.pop(block, None)
        self.ref_count[block] += 1

    def _take_free(self, count: int) -> list[int]:
        """The `count` least recently freed blocks; any hash they held is forgotten (evicted)."""
        free, block_hash, cached, ref_count = self.free, self.block_hash, self.cached, self.ref_count
        taken = []
        for _ in range(count):
            block = free.popitem(last=False)[0]
            old = block_hash[block]
            if old is not None:
                del cached[old]
                block_hash[block] = None
            ref_count[block] = 1
            taken.append(block)
        return taken
