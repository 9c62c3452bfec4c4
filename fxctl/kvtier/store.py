"""TierStore: the public API of the KV tier over opaque chunks (a string key and a buffer of known size).

put      copies (or borrows) a chunk into L1 and queues it for write-behind to L2
contains how many of an ordered list of keys, from the first, are stored (prefix semantics)
get_into fills the caller's buffers, L1 first, then L2 reads issued in parallel
remove, pin/unpin, flush, stats, close

Errors of L2 never reach the caller: they are misses or skipped writes, counted in stats().
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from fxctl.kvtier.admission import Admission
from fxctl.kvtier.buffers import ALIGN, BufferPool, is_aligned
from fxctl.kvtier.config import TierConfig, padded
from fxctl.kvtier.dram import DramPool, L1Chunk
from fxctl.kvtier.fingerprint import fingerprint, other_weights, record_model
from fxctl.kvtier.l2 import L2Tier
from fxctl.kvtier.metrics import TierMetrics
from fxctl.kvtier.segments import usable_cpus
from fxctl.kvtier.writebehind import PendingWrite, WriteBehind

log = logging.getLogger(__name__)


class TierStore:
    def __init__(self, cfg: TierConfig):
        self.cfg = cfg
        self.metrics = TierMetrics()
        self.metrics.watch(self.usage)
        self.pool = BufferPool(max(BufferPool.DEFAULT_KEEP_BYTES, cfg.max_pending_bytes))
        self.l1 = DramPool(cfg.l1_bytes, cfg.protected_share)
        self.admission = Admission(cfg.l2_admission)
        self.l2 = self._open_l2() if cfg.l2_bytes > 0 and cfg.l2_path else None
        self.namespace = fingerprint(cfg.model)
        self._foreign = other_weights(self.l2.index, self.namespace) if self.l2 is not None else set()
        if self.namespace and self.l2 is not None:
            record_model(cfg.l2_path, cfg.model, self.namespace, len(self._foreign))
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pins: Counter[str] = Counter()
        self._closed = False
        self._readers = ThreadPoolExecutor(max(1, cfg.io_threads), thread_name_prefix="kvtier-read")
        self.writes = WriteBehind(self.l2, cfg, self.metrics, self._cond, self._is_pinned, self._written_locked,
                                  self._give_back) if self.l2 is not None else None

    def _open_l2(self) -> L2Tier | None:
        """L2, or None when its directory cannot be opened: the engine then serves from L1 alone, counted
        (`l2_open_failures`) and logged, rather than failing to start."""
        try:
            return L2Tier(self.cfg, self.metrics, self.pool)
        except OSError as exc:
            self.metrics.add("l2_open_failures")
            log.error("kvtier: cannot open L2 at %s (%s); serving from L1 only", self.cfg.l2_path, exc)
            return None

    # -- which model's KV: keys under the weights' fingerprint ------------------------------------------
    def key(self, name: str) -> str:
        """The store's key for a caller's chunk name: under the model's fingerprint when the tier has one."""
        return f"{self.namespace}/{name}" if self.namespace else name

    def count_mismatches(self, names: Sequence[str]) -> int:
        """Of chunk names that missed, how many the tier holds under other weights; counted."""
        found = sum(1 for name in names if name in self._foreign) if self._foreign else 0
        if found:
            self.metrics.add("model_mismatches", found)
        return found

    def preallocate(self, nbytes: int) -> int:
        """Lay out L2's segment files for nbytes now (see L2Tier.preallocate); 0 without L2."""
        return self.l2.preallocate(nbytes) if self.l2 is not None else 0

    def _pending(self, key: str) -> PendingWrite | None:
        return self.writes.get(key) if self.writes is not None else None

    # -- put --------------------------------------------------------------------------------------
    def put(self, key: str, data, meta: bytes = b"", release: Callable[[], None] | None = None) -> bool:
        """Store a chunk. Without `release` the bytes are copied now; with it the buffer is borrowed
        (it must stay unchanged) until `release()` is called once the store is done with it (at once when
        it cannot be borrowed: not page-aligned, or L1 keeps a copy).
        Returns False if the chunk could be kept in no tier (or the admission policy refused it)."""
        t0 = time.perf_counter()
        src = memoryview(data).cast("B")
        nbytes = len(src)
        # a borrowed buffer can only go straight to L2: L1 keeps chunks in buffers of its own
        borrowed = (release is not None and self.cfg.l1_bytes <= 0 and self.writes is not None
                    and nbytes % ALIGN == 0 and is_aligned(src))
        if borrowed:
            buf = src
        else:
            buf = self.pool.take(padded(nbytes, ALIGN))
            buf[:nbytes] = src
            if release is not None:
                release()
                release = None
        kept, queued, free = self._place(PendingWrite(key, buf, nbytes, meta, release), borrowed)
        for b in free:
            self.pool.give(b)
        if not kept and not queued:
            self._give_back(buf, release)
        if kept:
            self.metrics.add("l1_stores")
            self.metrics.add("l1_bytes_written", nbytes)
        self.metrics.add("puts")
        self.metrics.add("put_bytes", nbytes)
        self.metrics.observe("put", time.perf_counter() - t0)
        return kept or queued

    def _place(self, item: PendingWrite, borrowed: bool) -> tuple[bool, bool, list]:
        """Put a new chunk into L1 and (if admitted) the write-behind queue in one step under the lock: in
        between, another thread's eviction could free the buffer while the queue still needs it."""
        with self._cond:
            to_l1 = not borrowed and self.cfg.l1_bytes > 0 and self.l1.fits(len(item.buf))
            admitted = self.writes is not None and self.admission.on_put(item.key, to_l1)
            queued = admitted and self.writes.wait_for_room_locked(len(item.buf))  # may let go of the lock
            kept, free = False, []
            if to_l1:
                # before the new pending write is registered: an older version's buffer still belongs to
                # its own (now cancelled) write, which frees it
                kept, free = self._insert_l1_locked(item.key, L1Chunk(item.buf, item.nbytes, item.meta))
            if not kept and not admitted and self.writes is not None and self.admission.on_evict(item.key):
                admitted = True  # L1 could not take it (pinned full): evicted at once
                queued = self.writes.has_room_locked(len(item.buf))
            if queued:
                self.writes.enqueue_locked(item)
            elif self.writes is not None:
                self.writes.cancel_locked(item.key)  # an older version must not be committed over this one
                if not admitted and not kept:  # kept: deferred (a hit or an eviction may still write it)
                    self.metrics.add("l2_admissions_refused")
        if kept and not queued and self.l2 is not None:
            self.l2.remove(item.key)  # L2 may hold an older version; this one goes there later, if admitted
        return kept, queued, free

    def _insert_l1_locked(self, key: str, chunk: L1Chunk, protected: bool = False) -> tuple[bool, list]:
        """Insert into L1; returns (inserted, evicted buffers that nobody holds any more)."""
        inserted, evicted = self.l1.insert(key, chunk, self._is_pinned, protected=protected)
        free = []
        for old_key, old in evicted:
            self.metrics.add("l1_evictions")
            writing = self._pending(old_key)
            if writing is not None and writing.buf is old.buf:
                continue  # the write-behind still holds this buffer (demotion in flight); it frees it
            if old_key == key or old.buf is chunk.buf:
                if old.buf is not chunk.buf:
                    free.append(old.buf)  # an older version of the chunk being put
                continue
            if not old.in_l2 and self._demote_locked(old_key, old):
                continue
            free.append(old.buf)
        return inserted, free

    def _demote_locked(self, key: str, chunk: L1Chunk) -> bool:
        """Queue an evicted chunk that L2 does not have yet, if the policy admits it (never waits)."""
        if self.writes is None:
            return False
        if not self.admission.on_evict(key):
            self.metrics.add("l2_admissions_refused")
            return False
        if key in self.writes or not self.writes.has_room_locked(len(chunk.buf)):
            self.metrics.add("l1_dropped")
            return False
        self.writes.enqueue_locked(PendingWrite(key, chunk.buf, chunk.nbytes, chunk.meta, None))
        self.metrics.add("l1_demotions")
        return True

    def _admit_on_hit_locked(self, key: str, chunk: L1Chunk) -> None:
        """A chunk hit in L1 that L2 does not have: queued now if the policy writes on a second use."""
        if self.writes is None or chunk.in_l2 or key in self.writes or not self.admission.on_l1_hit(key):
            return
        if self.writes.has_room_locked(len(chunk.buf)):
            self.writes.enqueue_locked(PendingWrite(key, chunk.buf, chunk.nbytes, chunk.meta, None))

    def _written_locked(self, batch: list[PendingWrite], stored: set[int]) -> None:
        """A write-behind batch is done: L1's copies learn whether L2 has them (keeping their buffers)."""
        for w in batch:
            chunk = self.l1.peek(w.key)
            if chunk is not None and chunk.buf is w.buf:
                chunk.in_l2 = id(w) in stored  # if not, its eviction tries the write again
                w.buf = None

    def _give_back(self, buf: memoryview, release: Callable[[], None] | None) -> None:
        if release is not None:
            release()
        else:
            self.pool.give(buf)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write-behind has finished; False on timeout."""
        return self.writes.flush(timeout) if self.writes is not None else True

    # -- lookups ----------------------------------------------------------------------------------
    def contains(self, keys: Sequence[str], pin: bool = False) -> int:
        """How many of keys, from the first, are stored; with pin, those are pinned (unpin them later)."""
        t0 = time.perf_counter()
        n = 0
        with self._lock:
            for key in keys:
                if key not in self.l1 and self._pending(key) is None and not (self.l2 and self.l2.contains(key)):
                    break
                if pin:
                    self._pins[key] += 1
                n += 1
        self.metrics.observe("contains", time.perf_counter() - t0)
        return n

    def size_of(self, key: str) -> tuple[int, bytes] | None:
        """(nbytes, meta) of a stored chunk, or None."""
        with self._lock:
            chunk = self.l1.peek(key)
            if chunk is not None:
                return chunk.nbytes, chunk.meta
            pending = self._pending(key)
            if pending is not None:
                return pending.nbytes, pending.meta
        return self.l2.meta(key) if self.l2 else None

    def get_into(self, keys: Sequence[str], buffers: Sequence) -> list[int | None]:
        """Fill buffers[i] with chunk keys[i]; returns its size, or None for a miss."""
        results: list[int | None] = [None] * len(keys)
        l2_jobs = []
        for i, (key, out) in enumerate(zip(keys, buffers)):
            dest = memoryview(out).cast("B")
            t0 = time.perf_counter()
            n = self._get_dram(key, dest)
            if n is not None:
                results[i] = n
                self.metrics.add("l1_hits")
                self.metrics.add("l1_bytes_read", n)
                self.metrics.observe("get_l1", time.perf_counter() - t0)
            else:
                self.metrics.add("l1_misses")
                if self.l2 is not None:
                    l2_jobs.append((i, key, dest))
        if l2_jobs:
            self._read_l2_windowed(l2_jobs, results)
        return results

    def _read_l2_windowed(self, jobs: list, results: list) -> None:
        """Chunk reads in parallel. On a block device, about `inflight_bytes` requested at once (4 x 32 MiB,
        16 x 4 MiB), to keep the device's queue full; where the CPU copies the bytes (tmpfs, page cache), one
        reader per CPU this process may run on: more readers only contend (on 2 CPUs with tmpfs, 2-4 readers
        moved 11.5 GB/s where 16 moved 9.5)."""
        sizes = [self.l2.meta(key) for _i, key, _d in jobs]
        chunk = max((s[0] for s in sizes if s), default=1)
        width = max(2, min(self.cfg.io_threads, self.cfg.inflight_bytes // max(chunk, 1)))
        if self.l2.files.cpu_copies:
            width = min(width, max(2, usable_cpus()))
        # `width` readers that each take the next job until none is left: one hand-off per reader, not one
        # future per chunk and one wake-up of the caller per completion
        taken = itertools.count()  # next() is atomic: each job index goes to exactly one reader

        def drain() -> None:
            for k in iter(taken.__next__, None):
                if k >= len(jobs):
                    return
                i, key, dest = jobs[k]
                results[i] = self._get_l2(key, dest)

        for fut in [self._readers.submit(drain) for _ in range(min(width, len(jobs)))]:
            fut.result()

    def _get_dram(self, key: str, dest: memoryview) -> int | None:
        with self._lock:
            chunk = self.l1.touch(key)
            if chunk is None:
                pending = self._pending(key)
                if pending is None:
                    return None
                chunk = L1Chunk(pending.buf, pending.nbytes, pending.meta)
            else:
                self._admit_on_hit_locked(key, chunk)
            if len(dest) < chunk.nbytes:
                return None
            dest[:chunk.nbytes] = chunk.buf[:chunk.nbytes]
            return chunk.nbytes

    def _get_l2(self, key: str, dest: memoryview) -> int | None:
        t0 = time.perf_counter()
        return self._after_l2(key, dest, self.l2.read(key, dest), t0)

    def _after_l2(self, key: str, dest: memoryview, n: int | None, t0: float) -> int | None:
        """Count an L2 read and promote a chunk reused often enough."""
        if n is None:
            self.metrics.add("l2_misses")
            return None
        self.metrics.add("l2_hits")
        self.metrics.add("l2_bytes_read", n)
        self.metrics.observe("get_l2", time.perf_counter() - t0)
        if self.l2.hits(key) >= self.cfg.promote_after_hits:
            self._promote(key, dest, n)
        return n

    def _promote(self, key: str, src: memoryview, nbytes: int) -> None:
        """Copy a chunk reused from L2 up into L1 (it already is in L2: no write-behind)."""
        if self.cfg.l1_bytes <= 0 or not self.l1.fits(padded(nbytes, ALIGN)):
            return
        meta = self.l2.meta(key)
        buf = self.pool.take(padded(nbytes, ALIGN))
        buf[:nbytes] = src[:nbytes]
        with self._lock:
            if key in self.l1 or self._pending(key) is not None:
                inserted, free = False, []
            else:
                inserted, free = self._insert_l1_locked(
                    key, L1Chunk(buf, nbytes, meta[1] if meta else b"", True), protected=True)
        for b in free:
            self.pool.give(b)
        if inserted:
            self.metrics.add("l2_promotions")
        else:
            self.pool.give(buf)

    # -- pins, removal ----------------------------------------------------------------------------
    def _is_pinned(self, key: str) -> bool:
        return self._pins.get(key, 0) > 0

    def pin(self, key: str) -> bool:
        with self._lock:
            if key not in self.l1 and self._pending(key) is None and not (self.l2 and self.l2.contains(key)):
                return False
            self._pins[key] += 1
            return True

    def unpin(self, key: str) -> bool:
        with self._lock:
            if self._pins.get(key, 0) <= 0:
                return False
            self._pins[key] -= 1
            if not self._pins[key]:
                del self._pins[key]
            return True

    def remove(self, key: str) -> bool:
        with self._lock:
            chunk = self.l1.remove(key)
            pending = self.writes.cancel_locked(key) if self.writes is not None else None
        if chunk is not None and (pending is None or pending.buf is not chunk.buf):
            self.pool.give(chunk.buf)
        in_l2 = self.l2.remove(key) if self.l2 else False
        return chunk is not None or pending is not None or in_l2

    def is_writing(self, key: str) -> bool:
        """True while a put of key waits for (or is in) its write to L2."""
        return self._pending(key) is not None

    def clear(self) -> int:
        """Remove every chunk from every tier; returns how many keys were removed."""
        with self._lock:
            keys = set(self.l1.keys()) | set(self.writes.pending if self.writes is not None else ())
        if self.l2 is not None:
            keys |= set(self.l2.index)
        return sum(self.remove(k) for k in keys)

    # -- stats, close -----------------------------------------------------------------------------
    @property
    def registry(self):
        """This store's prometheus_client CollectorRegistry (see metrics.py for the names)."""
        return self.metrics.registry

    def usage(self) -> dict:
        """What each tier holds now: l1, l2 (None without L2), write_behind, pinned_chunks."""
        with self._lock:
            l1 = {"chunks": len(self.l1), "used_bytes": self.l1.used, "budget_bytes": self.l1.budget,
                  "capacity_bytes": self.l1.budget, "protected_bytes": self.l1.protected_used}
            writes = self.writes
            pending = {"chunks": len(writes.pending) if writes else 0, "bytes": writes.queued_bytes if writes else 0}
            pins = len(self._pins)
        return {"l1": l1, "l2": self.l2.usage() if self.l2 else None, "write_behind": pending, "pinned_chunks": pins}

    def stats(self) -> dict:
        model = {"model": self.cfg.model, "fingerprint": self.namespace,
                 "chunks_of_other_weights": len(self._foreign)} if self.namespace else None
        return {**self.usage(), "recovery": self.l2.recovery if self.l2 else None, "model": model,
                **self.metrics.snapshot()}

    def close(self) -> None:
        """Finish queued writes, checkpoint the index and release everything."""
        if self._closed:
            return
        self._closed = True
        if self.writes is not None:
            self.writes.close()
        self._readers.shutdown(wait=True)
        if self.l2 is not None:
            self.l2.close()

    def __enter__(self) -> TierStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
