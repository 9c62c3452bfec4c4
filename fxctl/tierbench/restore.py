"""One backend's store and cold restore, timed by the same code for every backend (`fxctl bench tier`).

Run in a fresh process per backend (`python -m fxctl.tierbench.restore --backend fxctl ...`; the result is the
last line of stdout, JSON), so no backend inherits another's page cache, heap or threads. The rules:
- only the backend's own calls are inside the timer (and the CPU-time window); the byte-for-byte check of
  every restored chunk runs after the timer stops, batch by batch, for every backend alike;
- before each cold pass the backend is reopened where it can be (fxctl: a new store over the same
  directory; LMCache's LocalDiskBackend keeps its index in memory only, so it stays open) and the page
  cache is dropped; the bytes of the data files still cached are measured (fincore) and reported;
- CPU seconds are the process's user + system time (every thread) across the timed calls only.
- fxctl reads into and stores from memory made as LMCache makes its CPU pool (`caller_buffers`), the memory
  LocalDiskBackend uses: the rate of a copy or an O_DIRECT request depends on the memory, not only the backend.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import queue
import resource
import shutil
import statistics
import time

from fxctl.kvtier.config import GIB, IO_THREADS, MIB, padded
from fxctl.tierbench.chunks import SHAPES, ChunkShape, ChunkSource
from fxctl.tierbench.disk import cached_bytes, drop_page_cache


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "all": values} \
        if values else {}


def faulted_in(buf: memoryview) -> memoryview:
    buf[::4096] = b"\0" * len(range(0, len(buf), 4096))
    return buf


def caller_buffers(nbytes: int, count: int) -> list[memoryview]:
    """`count` buffers of the kind a caller hands the tier, made exactly as LMCache makes its CPU pool when it
    runs on a CPU (its default, `use_hugepages` off): one torch uint8 tensor, `fill_(0)` as first touch, cut into
    page-aligned pieces (without torch: one anonymous mmap, written once). The tier does not choose the caller's
    memory, and the rate of a copy or an O_DIRECT request depends on it: here, restores from tmpfs into fxctl's
    own huge-page-advised buffers ran ~11 % slower with ~14 % more CPU, and O_DIRECT from the virtio disk into
    a plain mmap'd pool moved 1.5 GB/s where the same reads into a pool made as LMCache's moved 2.2-2.3. So the
    harness gives every backend memory made the same way as the anchor's."""
    step = -(-max(nbytes, 1) // 4096) * 4096
    try:
        import torch
    except ImportError:
        mem = memoryview(mmap.mmap(-1, step * count, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS))
        zeros = bytes(step)
        for i in range(count):
            mem[i * step:(i + 1) * step] = zeros
    else:
        backing = torch.empty(step * count + 4096, dtype=torch.uint8)
        backing.fill_(0)
        offset = (-backing.data_ptr()) % 4096
        mem = memoryview(backing.numpy())[offset:offset + step * count]  # the view keeps the tensor alive
    return [mem[i * step:i * step + nbytes] for i in range(count)]


class FxctlBackend:
    """fxctl's TierStore with L1 off (every restore comes from L2), reopened before each pass.

    Puts go the way LMCache's server hands chunks to the tier (the MP adapter): the chunk is copied into a
    buffer of a pool allocated up front (as LocalDiskBackend copies into LMCache's CPU pool, of the same
    size: two batches), and the store borrows that buffer until its write is done (zero copy), so a full
    pool waits for the writes like LMCache's allocator. L2's segment files are laid out before the timer (as
    fio lays out its file and raw_block is given its device file)."""

    name = "fxctl"

    def __init__(self, directory: str, shape: ChunkShape, chunks: int, batch: int, io_threads: int,
                 verify_reads: bool = True):
        from fxctl.kvtier import TierConfig

        self.cfg = TierConfig(l2_path=directory, l1_bytes=0, io_threads=io_threads,
                              l2_bytes=padded(chunks * padded(shape.nbytes), GIB) + GIB, segment_bytes=GIB,
                              max_pending_bytes=1 * GIB, verify_reads=verify_reads)
        # the caller's memory, one pool as LMCache's, made now: a serving engine's KV buffers exist before a restore
        pool = caller_buffers(shape.nbytes, batch + min(chunks, 2 * batch))
        self.dests = pool[:batch]
        self.staging: queue.SimpleQueue = queue.SimpleQueue()
        for buf in pool[batch:]:
            self.staging.put(buf)
        self.store = self._open()
        # the segment files laid out before the timer, as fio lays out its file and raw_block gets its device
        self.store.preallocate(chunks * padded(shape.nbytes))

    def _open(self):
        from fxctl.kvtier import TierStore

        return TierStore(self.cfg)

    def put(self, key: str, data: memoryview) -> None:
        buf = self.staging.get()
        buf[:] = data
        self.store.put(key, buf, release=lambda: self.staging.put(buf))

    def finish_puts(self) -> None:
        self.store.flush()

    def reopen(self) -> None:
        self.store.close()
        self.store = self._open()

    def found(self, keys: list[str]) -> int:
        return sum(self.store.contains([k]) for k in keys)

    def load(self, keys: list[str]) -> list:
        got = self.store.get_into(keys, self.dests)
        return [d if n else None for n, d in zip(got, self.dests)]

    def release(self, views: list) -> None:
        pass

    def close(self) -> None:
        self.store.close()


# fxctl with verify_reads off: no checksum of what it reads (as LMCache's adapters), to show what the check
# costs; the tier's default verifies every chunk it reads
UNVERIFIED = "fxctl-unverified"
BACKENDS = ("fxctl", UNVERIFIED, "lmcache-localdisk")


def make_backend(name: str, directory: str, shape: ChunkShape, chunks: int, batch: int, io_threads: int):
    if name in ("fxctl", UNVERIFIED):
        return FxctlBackend(directory, shape, chunks, batch, io_threads, verify_reads=name == "fxctl")
    if name == "lmcache-localdisk":
        from fxctl.tierbench.lmcache_disk import LocalDiskBackendRun

        return LocalDiskBackendRun(directory, shape, chunks, batch, io_threads)
    raise ValueError(f"unknown backend {name}")


def measure(backend_name: str, directory: str, shape: ChunkShape, total_bytes: int, batch_bytes: int,
            io_threads: int, passes: int) -> dict:
    """Store every chunk, then `passes` cold restores; figures in GB/s (1e9 bytes) and CPU s per GB."""
    chunks = max(1, total_bytes // shape.nbytes)
    batch = max(1, batch_bytes // shape.nbytes)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    source = ChunkSource(shape.nbytes)
    keys = [source.key(i) for i in range(chunks)]
    backend = make_backend(backend_name, directory, shape, chunks, batch, io_threads)
    out: dict = {"backend": backend_name, "chunk_bytes": shape.nbytes, "chunks": chunks, "batch": batch,
                 "io_threads": io_threads, "passes": []}
    try:
        c0, t0 = cpu_seconds(), time.perf_counter()
        store_all(backend, source, keys)
        put_s = time.perf_counter() - t0
        out["put"] = {"gbps": chunks * shape.nbytes / put_s / 1e9,
                      "cpu_s_per_gb": (cpu_seconds() - c0) / (chunks * shape.nbytes / 1e9)}
        for _ in range(passes):
            out["passes"].append(cold_pass(backend, source, keys, batch, directory))
        backend.reopen()
        out["found_after_reopen"] = backend.found(keys)
    finally:
        backend.close()
        shutil.rmtree(directory, ignore_errors=True)
    gbps = [p["gbps"] for p in out["passes"]]
    out["restore_gbps"] = spread(gbps)
    out["restore_cpu_s_per_gb"] = spread([p["cpu_s_per_gb"] for p in out["passes"]])
    out["verified"] = all(p["verified"] == chunks for p in out["passes"])
    return out


def store_all(backend, source: ChunkSource, keys: list[str]) -> None:
    """Put every chunk and wait until the backend has written them all."""
    for i, key in enumerate(keys):
        backend.put(key, source.chunk(i))
    backend.finish_puts()


def cold_pass(backend, source: ChunkSource, keys: list[str], batch: int, directory: str) -> dict:
    backend.reopen()
    dropped = drop_page_cache()
    resident = cached_bytes(directory)
    wall = cpu = 0.0
    verified = 0
    for b in range(0, len(keys), batch):
        part = keys[b:b + batch]
        c0, t0 = cpu_seconds(), time.perf_counter()
        views = backend.load(part)
        wall += time.perf_counter() - t0
        cpu += cpu_seconds() - c0
        # outside the timer: every chunk, byte for byte
        verified += sum(v is not None and source.matches(b + j, v) for j, v in enumerate(views))
        backend.release(views)
    nbytes = len(keys) * source.chunk_bytes
    return {"gbps": nbytes / wall / 1e9, "seconds": wall, "cpu_s_per_gb": cpu / (nbytes / 1e9),
            "verified": verified, "cache_dropped": dropped, "cached_bytes_before": resident}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True, choices=BACKENDS)
    p.add_argument("--size", required=True, choices=sorted(SHAPES))
    p.add_argument("--dir", required=True)
    p.add_argument("--total", type=int, default=2 * GIB)
    p.add_argument("--batch", type=int, default=512 * MIB)
    p.add_argument("--io-threads", type=int, default=IO_THREADS)
    p.add_argument("--passes", type=int, default=3)
    a = p.parse_args(argv)
    result = measure(a.backend, a.dir, SHAPES[a.size], a.total, a.batch, a.io_threads, a.passes)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
