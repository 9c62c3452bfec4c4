"""Write-behind: chunks on their way from a put (or an L1 eviction) to L2, and the threads that write them.

The queue shares the store's lock (a Condition): a chunk enters L1 and this queue in one step, and a finished
batch updates L1's bookkeeping under the same lock (`on_written`), so no eviction can free a buffer a write
still needs. The queue is bounded in bytes (`max_pending_bytes`): puts wait for room (at most `put_wait_s`),
demotions never wait.

Each writer takes its share of what is queued (the queued bytes divided among the writers, at most
`WRITE_BATCH_BYTES`), writes it, then syncs once and commits it in one journal append: a batch per writer
rather than all of the queue to the first writer that wakes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from fxctl.kvtier.config import TierConfig
from fxctl.kvtier.l2 import L2Tier
from fxctl.kvtier.metrics import TierMetrics

log = logging.getLogger(__name__)

WRITE_BATCH_BYTES = 256 * 1024 * 1024  # most bytes one writer commits with one sync and one journal append
WRITE_BATCH_CHUNKS = 64


class PendingWrite:
    """A chunk queued for L2; `cancelled` once removed or put again (the writer then drops it).
    `release`: the owner's callback for a borrowed buffer (None: the buffer is the store's own)."""

    __slots__ = ("key", "buf", "nbytes", "meta", "release", "cancelled")

    def __init__(self, key: str, buf: memoryview, nbytes: int, meta: bytes,
                 release: Callable[[], None] | None):
        self.key, self.buf, self.nbytes, self.meta, self.release = key, buf, nbytes, meta, release
        self.cancelled = False


class WriteBehind:
    """The queue of chunks for L2 and its writer threads.

    on_written(batch, stored) runs under the lock once a batch is done (`stored`: the ids of the items L2
    committed); it sets `item.buf = None` for every buffer that stays in use elsewhere (L1). The buffers
    still set are handed to give_back(buf, release) afterwards, outside the lock."""

    def __init__(self, l2: L2Tier, cfg: TierConfig, metrics: TierMetrics, cond: threading.Condition,
                 is_pinned: Callable[[str], bool],
                 on_written: Callable[[list[PendingWrite], set[int]], None],
                 give_back: Callable[[memoryview, Callable[[], None] | None], None]):
        self.l2, self.cfg, self.metrics, self._cond = l2, cfg, metrics, cond
        self._is_pinned, self._on_written, self._give_back = is_pinned, on_written, give_back
        self.pending: dict[str, PendingWrite] = {}
        self._queue: deque[PendingWrite] = deque()
        self.queued_bytes = 0
        self._closed = False
        self._writers = [threading.Thread(target=self._write_loop, name=f"kvtier-write-{i}", daemon=True)
                         for i in range(max(1, cfg.write_threads))]
        for t in self._writers:
            t.start()

    def __contains__(self, key: str) -> bool:
        return key in self.pending

    def get(self, key: str) -> PendingWrite | None:
        return self.pending.get(key)

    # -- queueing (the caller holds the lock) -----------------------------------------------------
    def wait_for_room_locked(self, size: int) -> bool:
        """Wait (at most put_wait_s) until `size` more bytes fit; False: skip L2 for this chunk (counted)."""
        deadline = time.monotonic() + self.cfg.put_wait_s
        while self.queued_bytes + size > self.cfg.max_pending_bytes and self.queued_bytes and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                self.metrics.add("l2_skipped_writes")
                self.metrics.add("l2_queue_full")
                return False
            self._cond.wait(left)
        return not self._closed

    def has_room_locked(self, size: int) -> bool:
        """Room now, without waiting (demotions and admissions on a hit run under the lock)."""
        return not self._closed and (not self.queued_bytes
                                     or self.queued_bytes + size <= self.cfg.max_pending_bytes)

    def enqueue_locked(self, item: PendingWrite) -> None:
        """Queue an item; an older pending version of its key is cancelled (the writer drops it)."""
        old = self.pending.get(item.key)
        if old is not None:
            old.cancelled = True
        self.pending[item.key] = item
        self._queue.append(item)
        self.queued_bytes += len(item.buf)
        self._cond.notify_all()

    def cancel_locked(self, key: str) -> PendingWrite | None:
        """Forget the pending write of key (it must not be committed); returns it."""
        item = self.pending.pop(key, None)
        if item is not None:
            item.cancelled = True
        return item

    # -- writers ----------------------------------------------------------------------------------
    def _take_batch_locked(self) -> list[PendingWrite]:
        share = max(1, min(WRITE_BATCH_BYTES, self.queued_bytes // len(self._writers)))
        batch, batch_bytes = [], 0
        while self._queue and (not batch or batch_bytes + len(self._queue[0].buf) <= share) \
                and len(batch) < WRITE_BATCH_CHUNKS:
            item = self._queue.popleft()
            batch.append(item)
            batch_bytes += len(item.buf)
        return batch

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = self._take_batch_locked()
            self._write_batch(batch)

    def _write_batch(self, batch: list[PendingWrite]) -> None:
        live = [w for w in batch if not w.cancelled]
        t0 = time.perf_counter()
        try:
            ok = self.l2.store([(w.key, w.buf, w.nbytes, w.meta) for w in live], self._is_pinned,
                               wanted=lambda i: not live[i].cancelled) if live else []
        except Exception:  # a bug must not kill the writer (flush would wait forever) nor reach the caller
            log.exception("kvtier: write-behind batch failed")
            self.metrics.add("l2_skipped_writes", len(live))
            ok = [False] * len(live)
        if live:
            self.metrics.observe("l2_write", time.perf_counter() - t0)
        stored = {id(w) for w, done in zip(live, ok) if done}
        with self._cond:
            for w in batch:
                self.queued_bytes -= len(w.buf)
                if self.pending.get(w.key) is w:
                    del self.pending[w.key]
            self._on_written(batch, stored)
            self._cond.notify_all()
        for w in batch:
            if w.buf is not None:
                self._give_back(w.buf, w.release)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write has finished; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.queued_bytes:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        """Finish what is queued, then stop the writers."""
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._writers:
            t.join()
