"""HBM KV blocks as vLLM manages them: a fixed pool, reference counts, and a prefix cache of full blocks.

A freed block keeps its hash and stays findable until it is reused (least recently freed first), which is
what makes repeated prompts hit. `reset_prefix_cache` forgets every hash, as vLLM's endpoint does.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockPool:
    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self.ref_count: dict[int, int] = {}
        self.block_hash: dict[int, bytes] = {}
        self.cached: dict[bytes, int] = {}
        self.free: OrderedDict[int, None] = OrderedDict()  # freed blocks, least recently freed first
        self.never_used = num_blocks  # blocks num_blocks - never_used .. num_blocks - 1 were never handed out

    @property
    def num_free(self) -> int:
        return len(self.free) + self.never_used

    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks if self.num_blocks else 0.0

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
        reusable_free = sum(1 for b in reused if self.ref_count.get(b, 0) == 0)
        return self.num_free - reusable_free >= new

    def acquire(self, reused: list[int], new: int) -> list[int] | None:
        """Take the cached blocks `reused` and `new` fresh ones; None (and nothing taken) if HBM is full."""
        if not self.can_allocate(reused, new):
            return None
        for block in reused:
            self._ref(block)
        return list(reused) + self._take_free(new)

    def grow(self, count: int) -> list[int] | None:
        if self.num_free < count:
            return None
        return self._take_free(count)

    def release(self, blocks: list[int]) -> None:
        """Drop references; blocks reaching zero become free but keep their hash (reverse order, as vLLM)."""
        ref_count, free = self.ref_count, self.free
        for block in reversed(blocks):
            left = ref_count[block] - 1
            if left:
                ref_count[block] = left
            else:
                del ref_count[block]
                free[block] = None

    def register(self, blocks: list[int], hashes: list[bytes]) -> None:
        """Make full blocks findable by their hashes (a hash already cached keeps its first block)."""
        block_hash, cached = self.block_hash, self.cached
        new = {key: block for block, key in zip(blocks, hashes) if key not in cached and block not in block_hash}
        cached.update(new)
        block_hash.update(zip(new.values(), new.keys()))

    def reset_prefix_cache(self) -> int:
        dropped = len(self.cached)
        self.cached.clear()
        self.block_hash.clear()
        return dropped

    def _ref(self, block: int) -> None:
        count = self.ref_count.get(block, 0)
        if count == 0:
            self.free.pop(block, None)
        self.ref_count[block] = count + 1

    def _take_free(self, count: int) -> list[int]:
        """Never-used blocks first, then the least recently freed; a hash they held is forgotten (evicted)."""
        fresh = min(count, self.never_used)
        first = self.num_blocks - self.never_used
        taken = list(range(first, first + fresh))
        self.never_used -= fresh
        free, block_hash, cached = self.free, self.block_hash, self.cached
        for _ in range(count - fresh):
            block = free.popitem(last=False)[0]
            old = block_hash.pop(block, None)
            if old is not None:
                del cached[old]
            taken.append(block)
        self.ref_count.update(dict.fromkeys(taken, 1))
        return taken
