"""LMCache's in-process disk tier (LocalDiskBackend, O_DIRECT on) on the same data and disk, timed by
fxctl.tierbench.restore like every other backend.

Runs inside a real LMCache StorageManager on the CPU; needs `lmcache` (and torch) installed.
"""

from __future__ import annotations

import logging

from fxctl.poll import until
from fxctl.tierbench.chunks import ChunkShape
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


class LocalDiskBackendRun:
    """LMCache's LocalDiskBackend (O_DIRECT on, disk_io_threads = io_threads) behind the interface that
    fxctl.tierbench.restore times: put, finish_puts, reopen, found, load, release, close.

    Its disk index lives in memory only, so reopen() keeps the same manager (a new one finds nothing) and
    found() asks a second StorageManager over the same directory: what a restart would see."""

    name = "lmcache-localdisk"

    def __init__(self, directory: str, shape: ChunkShape, chunks: int, batch: int, io_threads: int):
        import torch

        self.shape, self.chunks, self.batch = shape, chunks, batch
        self.config = {"chunk_size": shape.tokens, "local_cpu": True,
                       "max_local_cpu_size": round((2 * batch * shape.nbytes + 256 * MIB) / GIB, 3),
                       "local_disk": f"file://{directory}/",
                       "max_local_disk_size": (chunks * shape.nbytes) / GIB + 1,
                       "extra_config": {"use_odirect": True, "disk_io_threads": io_threads}}
        self.dtype = getattr(torch, shape.dtype)
        self.manager = make_storage_manager(self.config, shape)
        self.disk = self.manager.storage_backends["LocalDiskBackend"]
        self._keys: dict[str, object] = {}
        self._pending: list = []

    def _key(self, key: str):
        if key not in self._keys:
            self._keys[key] = lmcache_key(self.shape, len(self._keys))
        return self._keys[key]

    def put(self, key: str, data: memoryview) -> None:
        import torch
        from lmcache.v1.memory_management import MemoryFormat

        obj = self.manager.allocate(torch.Size(self.shape.lmcache_shape), self.dtype, MemoryFormat.KV_2LTD)
        obj.byte_array.cast("B")[:] = data
        self._pending.append((self._key(key), obj))
        if len(self._pending) >= self.batch:
            self._put_pending()

    def _put_pending(self) -> None:
        if self._pending:
            self.manager.batched_put([k for k, _o in self._pending], [o for _k, o in self._pending])
            self._pending = []

    def finish_puts(self) -> None:
        self._put_pending()
        keys = list(self._keys.values())
        _wait_until(lambda: all(self.disk.contains(k) for k in keys), timeout_s=600)

    def reopen(self) -> None:
        pass  # a new manager would find nothing: its index is in memory only

    def found(self, keys: list[str]) -> int:
        other = make_storage_manager(self.config, self.shape)
        try:
            disk = other.storage_backends["LocalDiskBackend"]
            return sum(bool(disk.contains(self._key(k))) for k in keys)
        finally:
            other.close()

    def load(self, keys: list[str]) -> list:
        objs = self.disk.batched_get_blocking([self._key(k) for k in keys])
        self._objs = objs
        return [None if o is None else o.byte_array for o in objs]

    def release(self, views: list) -> None:
        for o in self._objs:
            if o is not None:
                o.ref_count_down()
        self._objs = []

    def close(self) -> None:
        self.manager.close()


def _wait_until(predicate, timeout_s: float) -> None:
    if not until(predicate, timeout_s, every_s=0.05):
        raise TimeoutError("LMCache did not finish writing to disk in time")
