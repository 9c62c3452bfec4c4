"""fxctl's KV tier as an L2 adapter of LMCache's multi-process mode (`lmcache server --l2-adapter`):

    --l2-adapter '{"type": "plugin", "module_path": "fxctl.integrations.lmcache.l2_adapter",
                   "class_name": "FxTierL2Adapter", "adapter_params": {"l2_path": "/mnt/kv", "l2_bytes": ...}}'

adapter_params are TierConfig fields, and:
  metrics_port     serve the tier's Prometheus metrics (fxctl_tier_*, see fxctl/kvtier/metrics.py) on
                   127.0.0.1:<port>/metrics; 0 or absent: no endpoint. `lmcache server` exposes no /metrics of
                   its own, so this endpoint also carries LMCache's MP metrics (lmcache_mp_*, kept in
                   prometheus_client's default registry of the server process) unless metrics_lmcache is false.
  metrics_host     the address to bind instead of 127.0.0.1.
  metrics_lmcache  true (default): include the server process's default registry (LMCache's own metrics).

Tasks run on a small thread pool; completion is signalled on the event fds LMCache's L2 controller polls.
The caller owns the MemoryObjs and keeps them until a task completes: stores write straight from them (the
task completes once the write-behind is done with every buffer; a buffer not page-aligned is copied),
loads read straight into them.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lmcache.lmcache_native import Bitmap
from lmcache.v1.distributed.internal_api import L2StoreResult
from lmcache.v1.distributed.l2_adapters.base import L2AdapterInterface, L2TaskId
from lmcache.v1.platform import create_event_notifier
from prometheus_client import REGISTRY

from fxctl.kvtier.config import TierConfig
from fxctl.kvtier.metrics import serve_metrics
from fxctl.kvtier.store import TierStore

log = logging.getLogger(__name__)


def object_key_name(key) -> str:
    """LMCache's key as a chunk name; the store keys it under the model's fingerprint (store.key)."""
    name = f"{key.model_name}@{key.kv_rank}@{key.chunk_hash.hex()}@{key.object_group_id}"
    return f"{name}@{key.cache_salt}" if key.cache_salt else name


class StoreTask:
    """Counts the buffers of one store task still borrowed; `on_done` runs once, when the last is released."""

    def __init__(self, parts: int, on_done):
        self.left, self.on_done, self.names = parts, on_done, []
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self.left -= 1
            last = self.left == 0
        if last:
            self.on_done()


class FxTierL2Adapter(L2AdapterInterface):
    def __init__(self, params: dict[str, Any], l1_memory_desc: Any = None):
        tier = TierConfig.from_mapping({"l1_bytes": 0, **(params or {})})
        if not tier.l2_path:
            raise ValueError("fxtier L2 adapter needs adapter_params.l2_path")
        super().__init__(max_capacity_bytes=tier.l2_bytes)
        self.store = TierStore(tier)
        self.metrics_server = self._serve_metrics(params or {})
        self._events = {name: create_event_notifier() for name in ("store", "lookup", "load")}
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="fxtier-l2")
        self._lock = threading.Lock()
        self._next_id = 0
        self._stored: dict[L2TaskId, L2StoreResult] = {}
        self._looked_up: dict[L2TaskId, Bitmap] = {}
        self._loaded: dict[L2TaskId, Bitmap] = {}

    def _serve_metrics(self, params: dict[str, Any]):
        registries = [self.store.registry]
        if str(params.get("metrics_lmcache", True)).lower() not in ("0", "false", "no", "off"):
            registries.append(REGISTRY)
        try:
            return serve_metrics(int(params.get("metrics_port") or 0), *registries,
                                 host=str(params.get("metrics_host") or "127.0.0.1"))
        except OSError as exc:  # a taken port must not stop the cache server: the tier serves, unobserved
            log.error("fxtier: cannot serve metrics on port %s: %s", params.get("metrics_port"), exc)
            return None

    def _name(self, key) -> str:
        return self.store.key(object_key_name(key))

    def _task_id(self) -> L2TaskId:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def get_store_event_fd(self) -> int:
        return self._events["store"].fileno()

    def get_lookup_and_lock_event_fd(self) -> int:
        return self._events["lookup"].fileno()

    def get_load_event_fd(self) -> int:
        return self._events["load"].fileno()

    # -- store ------------------------------------------------------------------------------------
    def submit_store_task(self, keys: list, objects: list) -> L2TaskId:
        task = self._task_id()
        self._pool.submit(self._store, task, keys, objects)
        return task

    def _store(self, task: L2TaskId, keys: list, objects: list) -> None:
        """Borrow each MemoryObj's bytes (no copy: LMCache keeps the objects until the task completes) and
        complete the task once the write-behind has released every one of them."""
        done = StoreTask(len(keys) + 1, lambda: self._store_done(task, done))
        for key, obj in zip(keys, objects):
            name = self._name(key)
            if self.store.contains([name]):
                done.release()
                continue
            data = obj.byte_array
            done.names.append((key, name, len(data)))
            self.store.put(name, data, release=done.release)  # copied where it cannot be borrowed
        done.release()  # the submitter's own share: the task cannot complete before every put is issued

    def _store_done(self, task: L2TaskId, done: StoreTask) -> None:
        stored = [(key, nbytes) for key, name, nbytes in done.names if self.store.contains([name])]
        with self._lock:
            self._stored[task] = L2StoreResult(len(stored) == len(done.names), sum(n for _k, n in stored))
        if stored:
            self._notify_keys_stored([k for k, _n in stored], [n for _k, n in stored])
        self._events["store"].notify()

    def pop_completed_store_tasks(self) -> dict[L2TaskId, L2StoreResult]:
        with self._lock:
            done, self._stored = self._stored, {}
        return done

    # -- lookup and lock --------------------------------------------------------------------------
    def submit_lookup_and_lock_task(self, keys: list, group_layout_descs: dict) -> L2TaskId:
        task = self._task_id()
        bitmap = Bitmap(len(keys))
        missed = []
        for i, key in enumerate(keys):
            if self.store.pin(self._name(key)):
                bitmap.set(i)
            else:
                missed.append(object_key_name(key))
        self.store.count_mismatches(missed)
        with self._lock:
            self._looked_up[task] = bitmap
        self._events["lookup"].notify()
        return task

    def query_lookup_and_lock_result(self, task_id: L2TaskId) -> Bitmap | None:
        with self._lock:
            return self._looked_up.pop(task_id, None)

    def submit_unlock(self, keys: list) -> None:
        for key in keys:
            self.store.unpin(self._name(key))

    # -- load -------------------------------------------------------------------------------------
    def submit_load_task(self, keys: list, objects: list) -> L2TaskId:
        task = self._task_id()
        self._pool.submit(self._load, task, keys, objects)
        return task

    def _load(self, task: L2TaskId, keys: list, objects: list) -> None:
        sizes = self.store.get_into([self._name(k) for k in keys], [o.byte_array for o in objects])
        bitmap = Bitmap(len(keys))
        hits = []
        for i, n in enumerate(sizes):
            if n is not None:
                bitmap.set(i)
                hits.append(keys[i])
        if hits:
            self._notify_keys_accessed(hits)
        with self._lock:
            self._loaded[task] = bitmap
        self._events["load"].notify()

    def query_load_result(self, task_id: L2TaskId) -> Bitmap | None:
        with self._lock:
            return self._loaded.pop(task_id, None)

    def close(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.close()
        self._pool.shutdown(wait=True)
        self.store.close()
        for notifier in self._events.values():
            notifier.close()
