"""fxctl's KV tier as an LMCache 0.5.x storage plugin (StoragePluginInterface), loaded through
`storage_plugins` + `extra_config` (see lmcache_config.render_lmcache_config).

Chunks are keyed by CacheEngineKey.to_string(), under the model's fingerprint (TierStore.key; fxtier.model).
A put borrows the MemoryObj's buffer (ref_count_up) and writes it to L2 straight from LMCache's pool when it
is aligned, releasing it (ref_count_down) once written; gets allocate from LocalCPUBackend and read L2
directly into the MemoryObj. Every chunk LMCache stores is written behind to L2, so chunks that
LocalCPUBackend evicts (it never demotes) are still served from here, and from here after a restart.

extra_config `fxtier.metrics_port` (0 or absent: none) serves the tier's Prometheus metrics (fxctl_tier_*, see
fxctl/kvtier/metrics.py) on 127.0.0.1:<port + worker id>/metrics, one endpoint per worker process;
`fxtier.metrics_host` binds another address. vLLM's own /metrics does not carry them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, Callable, List, Optional, Sequence

import torch
from lmcache.utils import CacheEngineKey
from lmcache.v1.memory_management import MemoryFormat, MemoryObj
from lmcache.v1.storage_backend.abstract_backend import StoragePluginInterface

from fxctl.integrations.lmcache.config import EXTRA_PREFIX, tier_config_from_extra
from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.kvtier.metrics import serve_metrics
from fxctl.kvtier.store import TierStore

log = logging.getLogger(__name__)


def encode_meta(obj: MemoryObj) -> bytes:
    """What a get needs to allocate the MemoryObj again: shapes, dtypes and format."""
    m = obj.metadata
    shapes = m.shapes if m.shapes else [m.shape]
    dtypes = m.dtypes if m.dtypes else [m.dtype]
    return json.dumps({"shapes": [list(s) for s in shapes], "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
                       "fmt": int(m.fmt.value)}, separators=(",", ":")).encode()


def decode_meta(meta: bytes) -> tuple[Any, Any, MemoryFormat]:
    d = json.loads(meta)
    shapes = [torch.Size(s) for s in d["shapes"]]
    dtypes = [getattr(torch, name) for name in d["dtypes"]]
    fmt = MemoryFormat(d["fmt"])
    if len(shapes) == 1:
        return shapes[0], dtypes[0], fmt
    return shapes, dtypes, fmt


class FxTierBackend(StoragePluginInterface):
    def __init__(self, dst_device: str = "cpu", config=None, metadata=None, local_cpu_backend=None,
                 loop: Optional[asyncio.AbstractEventLoop] = None):
        super().__init__(dst_device=dst_device, config=config, metadata=metadata,
                         local_cpu_backend=local_cpu_backend, loop=loop)
        if local_cpu_backend is None:
            raise ValueError("fxtier needs LocalCPUBackend (set local_cpu: true and max_local_cpu_size > 0)")
        extra = getattr(config, "extra_config", None) or {}
        tier = tier_config_from_extra(extra)
        if not tier.l2_path:
            raise ValueError("fxtier needs extra_config fxtier.l2_path")
        if metadata is not None:  # one directory (and journal) per worker process
            tier.l2_path = os.path.join(tier.l2_path, f"rank{metadata.worker_id}of{metadata.world_size}")
        self.chunk_size = getattr(config, "chunk_size", CHUNK_TOKENS)
        self.store = TierStore(tier)
        self.metrics_server = self._serve_metrics(extra, metadata.worker_id if metadata is not None else 0)
        log.info("fxtier: L2 at %s, %d chunks recovered", tier.l2_path, self.store.stats()["recovery"]["chunks"])

    def __str__(self) -> str:
        return "FxTierBackend"

    def _serve_metrics(self, extra: dict, worker_id: int):
        port = int(extra.get(EXTRA_PREFIX + "metrics_port") or 0)
        try:
            return serve_metrics(port + worker_id if port else 0, self.store.registry,
                                 host=str(extra.get(EXTRA_PREFIX + "metrics_host") or "127.0.0.1"))
        except OSError as exc:  # a taken port must not stop the engine: the tier serves, unobserved
            log.error("fxtier: cannot serve metrics on port %d: %s", port + worker_id, exc)
            return None

    # -- lookups ----------------------------------------------------------------------------------
    def contains(self, key: CacheEngineKey, pin: bool = False) -> bool:
        return self._contains([key.to_string()], pin) == 1

    def batched_contains(self, keys: List[CacheEngineKey], pin: bool = False) -> int:
        return self._contains([k.to_string() for k in keys], pin)

    async def batched_async_contains(self, lookup_id: str, keys: List[CacheEngineKey], pin: bool = False) -> int:
        return self.batched_contains(keys, pin)

    def _contains(self, names: list[str], pin: bool) -> int:
        """How many of `names`, from the first, the store holds for this model; misses of chunks it holds
        under other weights are counted (model_mismatches)."""
        found = self.store.contains([self.store.key(n) for n in names], pin=pin)
        if found < len(names):
            self.store.count_mismatches(names[found:])
        return found

    def exists_in_put_tasks(self, key: CacheEngineKey) -> bool:
        return self.store.is_writing(self.store.key(key.to_string()))

    # -- puts -------------------------------------------------------------------------------------
    def batched_submit_put_task(self, keys: Sequence[CacheEngineKey], objs: List[MemoryObj],
                                transfer_spec: Any = None,
                                on_complete_callback: Optional[Callable[[CacheEngineKey], None]] = None) -> None:
        for key, obj in zip(keys, objs):
            skey = self.store.key(key.to_string())
            if self.store.contains([skey]) or self.store.is_writing(skey):
                continue
            obj.ref_count_up()
            self.store.put(skey, obj.byte_array, meta=encode_meta(obj),
                           release=self._releaser(key, obj, on_complete_callback))
        return None

    @staticmethod
    def _releaser(key, obj, callback):
        def release() -> None:
            obj.ref_count_down()
            if callback is not None:
                try:
                    callback(key)
                except Exception as exc:  # LMCache's contract: callback errors are logged, not raised
                    log.warning("fxtier: on_complete_callback failed for %s: %s", key, exc)
        return release

    # -- gets -------------------------------------------------------------------------------------
    def get_blocking(self, key: CacheEngineKey) -> Optional[MemoryObj]:
        return self.batched_get_blocking([key])[0]

    def batched_get_blocking(self, keys: List[CacheEngineKey]) -> List[Optional[MemoryObj]]:
        """Allocate from LocalCPUBackend and fill every hit with one parallel read; None for misses."""
        skeys = [self.store.key(k.to_string()) for k in keys]
        objs: List[Optional[MemoryObj]] = []
        for skey in skeys:
            found = self.store.size_of(skey)
            obj = None
            if found is not None:
                shape, dtype, fmt = decode_meta(found[1])
                obj = self.local_cpu_backend.allocate(shape, dtype, fmt, busy_loop=False)
                if obj is None:
                    log.warning("fxtier: LocalCPUBackend has no room to restore %s; restore in smaller batches",
                                skey)
            objs.append(obj)
        wanted = [(i, skeys[i], o) for i, o in enumerate(objs) if o is not None]
        sizes = self.store.get_into([s for _i, s, _o in wanted], [o.byte_array for _i, _s, o in wanted])
        for (i, _skey, obj), n in zip(wanted, sizes):
            if n is None:
                obj.ref_count_down()
                objs[i] = None
        return objs

    async def batched_get_non_blocking(self, lookup_id: str, keys: List[CacheEngineKey],
                                       transfer_spec: Any = None) -> List[MemoryObj]:
        """Prefetch: the hits up to the first miss; the pins taken by batched_async_contains are released."""
        try:
            objs = await asyncio.to_thread(self.batched_get_blocking, keys)
        finally:
            for k in keys:
                self.store.unpin(self.store.key(k.to_string()))
        out: List[MemoryObj] = []
        for i, obj in enumerate(objs):
            if obj is None:
                for rest in objs[i + 1:]:
                    if rest is not None:
                        rest.ref_count_down()
                break
            out.append(obj)
        return out

    # -- pins, removal, lifecycle -----------------------------------------------------------------
    def pin(self, key: CacheEngineKey) -> bool:
        return self.store.pin(self.store.key(key.to_string()))

    def unpin(self, key: CacheEngineKey) -> bool:
        return self.store.unpin(self.store.key(key.to_string()))

    def remove(self, key: CacheEngineKey, force: bool = True) -> bool:
        return self.store.remove(self.store.key(key.to_string()))

    def clear(self) -> int:
        """Remove every chunk; returns the tokens cleared (chunks x chunk_size), as LMCache counts them."""
        return self.store.clear() * self.chunk_size

    def touch_cache(self) -> None:
        """Recency is tracked by the tier itself on every hit."""

    def get_allocator_backend(self):
        return self.local_cpu_backend

    def get_memory_allocator(self):
        return self.local_cpu_backend.get_memory_allocator()

    def stats(self) -> dict:
        return self.store.stats()

    def close(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.close()
        self.store.close()
