"""L2: chunks in preallocated segment files, indexed by a journal, with LRU eviction within a byte budget.

Never raises an I/O error into its caller: a failed read is a miss, a failed write a skipped write,
each counted in the metrics and logged.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from fxctl.kvtier.buffers import ALIGN, BufferPool, is_aligned
from fxctl.kvtier.checksum import Digest, available, default_algorithm
from fxctl.kvtier.config import PAGE_BYTES, TierConfig, padded
from fxctl.kvtier.extents import ExtentAllocator
from fxctl.kvtier.journal import OP_DEL, OP_PUT, ChunkLocation, Journal, encode
from fxctl.kvtier.metrics import TierMetrics
from fxctl.kvtier.segments import SegmentFiles

log = logging.getLogger(__name__)

GROW_RETRY_S = 30.0


def lock_directory(path: str) -> int:
    """Hold an exclusive lock on the L2 directory for this process's life (one writer per journal)."""
    fd = os.open(os.path.join(path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise RuntimeError(f"kvtier: {path} is in use by another store (give each process its own L2 directory)") \
            from exc
    return fd


class L2Entry:
    __slots__ = ("loc", "readers", "dead", "hits")

    def __init__(self, loc: ChunkLocation):
        self.loc = loc
        self.readers = 0
        self.dead = False
        self.hits = 0


class L2Tier:
    def __init__(self, cfg: TierConfig, metrics: TierMetrics, pool: BufferPool):
        self.cfg = cfg
        self.metrics = metrics
        self.pool = pool
        os.makedirs(cfg.l2_path, exist_ok=True)
        self._lock_fd = lock_directory(cfg.l2_path)
        self.segment_bytes = padded(min(cfg.segment_bytes, max(cfg.l2_bytes, PAGE_BYTES)))
        self.max_segments = max(1, cfg.l2_bytes // self.segment_bytes)
        self.files = SegmentFiles(cfg.l2_path, self.segment_bytes, cfg.direct_io, cfg.max_request_bytes,
                                  cfg.piece_bytes)
        self.journal = Journal(cfg.l2_path, durable=cfg.durable)
        self.index: OrderedDict[str, L2Entry] = OrderedDict()
        self.allocators: dict[int, ExtentAllocator] = {}
        self._lock = threading.Lock()
        self._grow_blocked_at = 0.0
        self.algorithm = default_algorithm()
        self.recovery: dict = {}
        self._recover()

    # -- recovery -------------------------------------------------------------------------------
    def _recover(self) -> None:
        t0 = time.perf_counter()
        for seg in self.files.open_existing():
            self.allocators[seg] = ExtentAllocator(self.segment_bytes // PAGE_BYTES)
        locations = self.journal.recover()
        dropped = 0
        for key, loc in locations.items():
            alloc = self.allocators.get(loc.segment)
            if alloc is None or not alloc.reserve(loc.page, loc.pages):
                dropped += 1
                continue
            self.index[key] = L2Entry(loc)
        damage = self.journal.manifest_damage
        self.recovery = {"chunks": len(self.index), "dropped": dropped, "torn_bytes": self.journal.torn_bytes,
                         "leftovers_removed": list(self.journal.leftovers_removed), "manifest_damaged": damage,
                         "seconds": round(time.perf_counter() - t0, 4)}
        if dropped:
            log.warning("kvtier L2: %d indexed chunks point outside the segment files; dropped", dropped)
        if damage:  # counted once; a whole manifest replaces the damaged one now, not at the next checkpoint
            self.metrics.add("l2_manifest_damaged")
            self.checkpoint_locked()

    # -- lookups ----------------------------------------------------------------------------------
    def contains(self, key: str) -> bool:
        return key in self.index

    def meta(self, key: str) -> tuple[int, bytes] | None:
        entry = self.index.get(key)
        return None if entry is None else (entry.loc.nbytes, entry.loc.meta)

    def hits(self, key: str) -> int:
        entry = self.index.get(key)
        return 0 if entry is None else entry.hits

    # -- reads ------------------------------------------------------------------------------------
    def read(self, key: str, dest: memoryview) -> int | None:
        """Copy a chunk into dest (at least its size); its size, or None on a miss or a failure."""
        with self._lock:
            entry = self.index.get(key)
            if entry is None or entry.dead or len(dest) < entry.loc.nbytes:
                return None
            if self.cfg.verify_reads and not available(entry.loc.algorithm):
                # written where xxhash was installed: a miss here, but the chunk is kept for such a reader
                self.metrics.add("l2_unverifiable")
                log.warning("kvtier L2: cannot verify %s (checksum %d needs the xxhash package)",
                            key, entry.loc.algorithm)
                return None
            entry.readers += 1
            entry.hits += 1
            self.index.move_to_end(key)
            loc = entry.loc
        ok = False
        try:
            digest = Digest(loc.algorithm) if self.cfg.verify_reads else None
            self._read_location(loc, dest, digest)
            if digest is not None and digest.value() != loc.crc:
                self.metrics.add("l2_checksum_failures")
                log.error("kvtier L2: checksum mismatch for %s (segment %d page %d); dropped",
                          key, loc.segment, loc.page)
            else:
                ok = True
        except OSError as exc:
            self.metrics.add("l2_read_errors")
            log.error("kvtier L2: read of %s failed: %s", key, exc)
        finally:
            with self._lock:
                entry.readers -= 1
                if not ok:
                    self._drop_locked(key, entry)
                elif entry.dead and entry.readers == 0:
                    self._free_locked(entry.loc)
        return loc.nbytes if ok else None

    def _read_location(self, loc: ChunkLocation, dest: memoryview, digest: Digest | None) -> None:
        """Read a chunk into dest, feeding digest (if any) with its nbytes as they arrive."""
        offset = loc.page * PAGE_BYTES
        want = padded(loc.nbytes, ALIGN)
        if len(dest) >= want and is_aligned(dest):
            self.files.read_into(loc.segment, offset, dest[:want], digest, loc.nbytes)
            return
        head = (loc.nbytes // ALIGN) * ALIGN if is_aligned(dest) else 0
        if head:
            self.files.read_into(loc.segment, offset, dest[:head], digest, head)
        bounce = self.pool.take(want - head)
        try:
            self.files.read_into(loc.segment, offset + head, bounce, digest, loc.nbytes - head)
            dest[head:loc.nbytes] = bounce[:loc.nbytes - head]
        finally:
            self.pool.give(bounce)

    # -- writes -----------------------------------------------------------------------------------
    def store(self, items: list[tuple[str, memoryview, int, bytes]], is_pinned: Callable[[str], bool],
              wanted: Callable[[int], bool] = lambda i: True) -> list[bool]:
        """Write chunks (key, aligned buffer, nbytes, meta) and commit them in one journal append.

        `wanted(i)` is asked again at commit time: a chunk removed or replaced meanwhile is not committed."""
        placed: list[tuple[int, str, ChunkLocation, memoryview]] = []
        with self._lock:
            for i, (key, buf, nbytes, meta) in enumerate(items):
                pages = padded(nbytes) // PAGE_BYTES
                where = self._allocate_locked(pages, is_pinned)
                if where is None:
                    self.metrics.add("l2_skipped_writes")
                    continue
                loc = ChunkLocation(where[0], where[1], pages, nbytes, 0, meta, self.algorithm)
                placed.append((i, key, loc, buf))
        written: list[tuple[int, str, ChunkLocation]] = []
        for i, key, loc, buf in placed:
            try:
                digest = Digest(loc.algorithm)
                self.files.write_from(loc.segment, loc.page * PAGE_BYTES, buf[:padded(loc.nbytes, ALIGN)],
                                      digest, loc.nbytes)
                loc.crc = digest.value()
                written.append((i, key, loc))
            except OSError as exc:
                self._count_write_error(exc, key)
                with self._lock:
                    self._free_locked(loc)
        ok = [False] * len(items)
        if not written:
            return ok
        early = None   # the journal generation the records went into before the sync (durable stores)
        try:
            if self.cfg.durable:
                # the records first, unsynced: a crash of the process from here on keeps these chunks (their
                # bytes and records are in the kernel's hands); then both are synced before they count
                with self._lock:
                    self.journal.append([encode(OP_PUT, key, loc) for _i, key, loc in written], sync=False)
                    early = self.journal.generation
                self.files.sync({loc.segment for _i, _k, loc in written})
            with self._lock:
                dropped = [w for w in written if not wanted(w[0])]
                written = [w for w in written if wanted(w[0])]
                # a chunk removed meanwhile loses its early record; one replaced keeps the newer one's
                undo = [encode(OP_DEL, key) for _i, key, _loc in dropped if early is not None and key not in self.index]
                if early is None or early != self.journal.generation:   # none yet, or a checkpoint rotated it
                    self.journal.append([encode(OP_PUT, key, loc) for _i, key, loc in written] + undo)
                else:
                    self.journal.append(undo, sync=False)
                    self.journal.sync()
                for _i, _key, loc in dropped:
                    self._free_locked(loc)
                for i, key, loc in written:
                    old = self.index.pop(key, None)
                    if old is not None:
                        self._retire_locked(old)
                    self.index[key] = L2Entry(loc)
                    ok[i] = True
                self._maybe_checkpoint_locked()
        except OSError as exc:
            for _i, key, _loc in written:
                self._count_write_error(exc, key)
            with self._lock:
                if early is not None:   # best effort: the early records must not outlive a failed commit
                    try:
                        self.journal.append([encode(OP_DEL, key) for _i, key, _loc in written
                                             if key not in self.index])
                    except OSError:
                        pass   # a restart then reads those chunks' checksums: misses, counted
                for _i, _key, loc in written:
                    self._free_locked(loc)
        self.metrics.add("l2_bytes_written", sum(loc.nbytes for i, _k, loc in written if ok[i]))
        self.metrics.add("l2_stores", sum(1 for i, _k, _loc in written if ok[i]))
        return ok

    def _count_write_error(self, exc: OSError, key: str) -> None:
        self.metrics.add("l2_skipped_writes")
        self.metrics.add("l2_enospc" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "l2_write_errors")
        log.error("kvtier L2: write of %s skipped: %s", key, exc)

    def _allocate_locked(self, pages: int, is_pinned: Callable[[str], bool]) -> tuple[int, int] | None:
        if pages * PAGE_BYTES > self.segment_bytes:
            return None
        while True:
            for seg, alloc in self.allocators.items():
                page = alloc.allocate(pages)
                if page is not None:
                    return seg, page
            if self._grow_locked():
                continue
            if not self._evict_one_locked(is_pinned):
                return None

    def preallocate(self, nbytes: int) -> int:
        """Create segments now until they hold at least nbytes (within the capacity), so the first writes do
        not pay for the allocation (as a raw device or fio's laid-out file): returns how many exist."""
        with self._lock:
            while len(self.allocators) * self.segment_bytes < nbytes and self._grow_locked():
                pass
            return len(self.allocators)

    def _grow_locked(self) -> bool:
        if len(self.allocators) >= self.max_segments:
            return False
        if self._grow_blocked_at and time.monotonic() - self._grow_blocked_at < GROW_RETRY_S:
            return False
        seg = max(self.allocators, default=-1) + 1
        try:
            self.files.create(seg)
        except OSError as exc:
            self._grow_blocked_at = time.monotonic()
            self.metrics.add("l2_enospc" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "l2_write_errors")
            log.error("kvtier L2: cannot preallocate segment %d (%s); L2 stays at %d segments",
                      seg, exc, len(self.allocators))
            return False
        self.allocators[seg] = ExtentAllocator(self.segment_bytes // PAGE_BYTES)
        return True

    def _evict_one_locked(self, is_pinned: Callable[[str], bool]) -> bool:
        for key, entry in self.index.items():
            if entry.readers == 0 and not is_pinned(key):
                self.metrics.add("l2_evictions")
                return self._drop_locked(key, entry)
        return False

    # -- removal ----------------------------------------------------------------------------------
    def remove(self, key: str) -> bool:
        with self._lock:
            entry = self.index.get(key)
            return entry is not None and self._drop_locked(key, entry)

    def _drop_locked(self, key: str, entry: L2Entry) -> bool:
        """Forget a chunk: the DEL record is written before its pages can be reused."""
        if self.index.get(key) is not entry:
            return False
        try:
            self.journal.append([encode(OP_DEL, key)])
        except OSError as exc:
            # without the record the pages must not be reused; the chunk is still forgotten in memory
            log.error("kvtier L2: cannot journal removal of %s (%s); its pages stay reserved", key, exc)
            del self.index[key]
            return True
        del self.index[key]
        self._retire_locked(entry)
        return True

    def _retire_locked(self, entry: L2Entry) -> None:
        entry.dead = True
        if entry.readers == 0:
            self._free_locked(entry.loc)

    def _free_locked(self, loc: ChunkLocation) -> None:
        self.allocators[loc.segment].free(loc.page, loc.pages)

    def _maybe_checkpoint_locked(self) -> None:
        if self.journal.records_since_checkpoint < self.cfg.checkpoint_records:
            return
        self.checkpoint_locked()

    def checkpoint_locked(self) -> None:
        try:
            self.journal.checkpoint({k: e.loc for k, e in self.index.items()})
        except OSError as exc:
            self.metrics.add("l2_checkpoint_errors")
            log.error("kvtier L2: checkpoint failed (%s); the journal keeps growing", exc)

    # -- accounting -------------------------------------------------------------------------------
    def usage(self) -> dict:
        with self._lock:
            total = len(self.allocators) * self.segment_bytes
            free = sum(a.free_pages for a in self.allocators.values()) * PAGE_BYTES
            return {"chunks": len(self.index), "capacity_bytes": self.max_segments * self.segment_bytes,
                    "allocated_bytes": total, "used_bytes": total - free, "free_bytes": free,
                    "data_bytes": sum(e.loc.nbytes for e in self.index.values()),
                    "segments": len(self.allocators), "direct_io": self.files.direct}

    def close(self) -> None:
        with self._lock:
            self.checkpoint_locked()
            self.journal.close()
            self.files.close()
            os.close(self._lock_fd)


def write_index_only(directory: str, keys: list[str], segment_bytes: int, batch: int = 5000) -> int:
    """An L2 directory whose journal indexes one page per key (segments made for them, no chunk contents
    written): what index recovery is measured on (`fxctl bench tier`). Returns the number of segments.
    The journal's format stays the tier's own business: callers hand keys, not records."""
    segment_pages = segment_bytes // PAGE_BYTES
    segments = -(-len(keys) // segment_pages)
    files = SegmentFiles(directory, segment_bytes)
    for seg in range(segments):
        files.create(seg)
    files.close()
    journal = Journal(directory, durable=False)
    journal.recover()
    try:
        for start in range(0, len(keys), batch):
            journal.append([encode(OP_PUT, key, ChunkLocation(i // segment_pages, i % segment_pages, 1, PAGE_BYTES, i))
                            for i, key in enumerate(keys[start:start + batch], start)])
    finally:
        journal.close()
    return segments
