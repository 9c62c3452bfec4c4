"""LMCache's own disk tier (LocalDiskBackend, O_DIRECT on) on the same data and disk, for comparison.

Runs inside a real LMCache StorageManager on the CPU; needs `lmcache` (and torch) installed.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

from fxctl.bench.chunks import ChunkShape, ChunkSource
from fxctl.bench.disk import drop_page_cache
from fxctl.units import GIB, MIB

log = logging.getLogger(__name__)


def make_storage_manager(config: dict, shape: ChunkShape):
    """A real LMCache StorageManager for one worker of a model with this chunk shape (CPU only)."""
    import torch
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.event_manager import EventManager
    from lmcache.v1.metadata import LMCacheMetadata
    from lmcache.v1.storage_backend.storage_manager import StorageManager

    dtype = getattr(torch, shape.dtype)
    metadata = LMCacheMetadata(model_name="fxbench", world_size=1, local_world_size=1, worker_id=0,
                               local_worker_id=0, kv_dtype=dtype,
                               kv_shape=(shape.layers, 2, shape.tokens, shape.kv_heads_per_rank, shape.head_dim),
                               role="worker")
    return StorageManager(LMCacheEngineConfig.from_dict(config), metadata, event_manager=EventManager())


def lmcache_key(shape: ChunkShape, i: int):
    import torch
    from lmcache.utils import CacheEngineKey

    return CacheEngineKey("fxbench", 1, 0, i, getattr(torch, shape.dtype))


def bench_lmcache_restore(spec, shape: ChunkShape, chunks: int) -> dict:
    try:
        import torch
        from lmcache.v1.memory_management import MemoryFormat
    except ImportError as exc:
        return {"error": f"lmcache not importable: {exc}"}
    directory = os.path.join(spec.directory, f"lmcache-{shape.nbytes}")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    batch = max(1, spec.batch_bytes // shape.nbytes)
    config = {"chunk_size": shape.tokens, "local_cpu": True,
              "max_local_cpu_size": round((2 * batch * shape.nbytes + 256 * MIB) / GIB, 3),
              "local_disk": f"file://{directory}/", "max_local_disk_size": (chunks * shape.nbytes) / GIB + 1,
              "extra_config": {"use_odirect": True, "disk_io_threads": spec.io_threads}}
    source = ChunkSource(shape.nbytes)
    dtype = getattr(torch, shape.dtype)
    keys = [lmcache_key(shape, i) for i in range(chunks)]
    out: dict = {"config": config}
    manager = make_storage_manager(config, shape)
    try:
        disk = manager.storage_backends["LocalDiskBackend"]
        t0 = time.perf_counter()
        for b in range(0, chunks, batch):
            objs = []
            for i in range(b, min(chunks, b + batch)):
                obj = manager.allocate(torch.Size(shape.lmcache_shape), dtype, MemoryFormat.KV_2LTD)
                obj.byte_array.cast("B")[:] = source.chunk(i)
                objs.append(obj)
            manager.batched_put(keys[b:b + len(objs)], objs)
        _wait_until(lambda: all(disk.contains(k) for k in keys), timeout_s=600)
        out["put_gbps"] = chunks * shape.nbytes / (time.perf_counter() - t0) / 1e9
        passes = []
        verified = True
        for _ in range(spec.passes):
            drop_page_cache()
            t0 = time.perf_counter()
            for b in range(0, chunks, batch):
                objs = disk.batched_get_blocking(keys[b:b + batch])
                verified &= all(o is not None for o in objs)
                if b + batch >= chunks:  # check the last batch's bytes
                    verified &= all(o is not None and source.matches(b + j, o.byte_array) for j, o in enumerate(objs))
                for o in objs:
                    if o is not None:
                        o.ref_count_down()
            passes.append(chunks * shape.nbytes / (time.perf_counter() - t0) / 1e9)
        out.update(restore_gbps=max(passes), restore_passes=passes, verified=verified)
    finally:
        manager.close()
    manager = make_storage_manager(config, shape)
    try:
        disk = manager.storage_backends["LocalDiskBackend"]
        out["found_after_restart"] = sum(bool(disk.contains(k)) for k in keys)
    finally:
        manager.close()
    shutil.rmtree(directory, ignore_errors=True)
    return out


def _wait_until(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("LMCache did not finish writing to disk in time")
        time.sleep(0.05)
