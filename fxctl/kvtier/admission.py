"""Write admission for L2: which chunks are worth an SSD write (wear and write bandwidth), and when.

  always      every put is queued for L2 at once (write-behind); a chunk L1 evicts before L2 has it is
              queued then. Every chunk reaches L2: the most written, the best cold recovery.
  second-use  a chunk is written when it is used a second time: put again (after L1 lost it) or hit in L1.
              Chunks used once (most of a multi-turn workload's last turns) never reach L2; the keys seen
              once are remembered (a bounded set), so a chunk recomputed after eviction is written then.
  l1-evict    L1 is write-back: a chunk is written only when L1 evicts it (a chunk L1 cannot hold at all
              is written at once). Chunks that live and die in L1 cost no write; what L1 holds at a crash
              is lost (cold recovery finds only what was evicted before).

Refusals are counted (`l2_admissions_refused`: an eviction, or a put L1 could not keep, that the policy did not
write, so the chunk left the tier); a put L1 keeps is only deferred. The write amplification is the tier's
`l2_bytes_written` over `put_bytes`.
"""

from __future__ import annotations

from collections import OrderedDict

ADMISSION_POLICIES = ("always", "second-use", "l1-evict")
DEFAULT_ADMISSION = "always"
REMEMBERED_KEYS = 1 << 18  # keys seen once that second-use remembers (LRU): about 30 MiB at most


class Admission:
    """The decisions of one policy. Not thread-safe: the store calls it under its lock."""

    def __init__(self, policy: str = DEFAULT_ADMISSION, remembered: int = REMEMBERED_KEYS):
        if policy not in ADMISSION_POLICIES:
            raise ValueError(f"l2_admission must be one of {', '.join(ADMISSION_POLICIES)}, not {policy!r}")
        self.policy = policy
        self.remembered = remembered
        self._seen: OrderedDict[int, None] = OrderedDict()  # hash(key) of chunks used once

    def on_put(self, key: str, kept_in_l1: bool) -> bool:
        """Queue this put for L2 now?"""
        if self.policy == "always":
            return True
        if self.policy == "l1-evict":
            return not kept_in_l1  # L1 could not hold it: it is evicted at once
        return self._second_use(key)

    def on_l1_hit(self, key: str) -> bool:
        """A chunk L2 does not have was hit in L1: queue it now?"""
        if self.policy != "second-use":
            return False
        self._seen.pop(hash(key), None)
        return True

    def on_evict(self, key: str) -> bool:
        """L1 evicts a chunk L2 does not have: queue it (True) or let it go?"""
        if self.policy == "second-use":
            return False  # used once (a second use queued it already)
        return True

    def _second_use(self, key: str) -> bool:
        h = hash(key)
        if h in self._seen:
            del self._seen[h]
            return True
        self._seen[h] = None
        if len(self._seen) > self.remembered:
            self._seen.popitem(last=False)
        return False
