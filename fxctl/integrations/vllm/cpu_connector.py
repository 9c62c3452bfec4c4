"""fxctl's KV connector for vLLM on CPU hosts: LMCache (and so fxctl's tier) behind vLLM's CPU KV cache.

LMCache 0.5.6 moves KV between vLLM and its memory objects through a "GPU connector" that it only has
for cuda, xpu, musa and hpu devices; on a CPU host it logs "No supported cpu connector found" and falls
back to recompute. This module supplies the missing piece and nothing more:

- `CpuPagedConnector`, an LMCache `GPUConnectorInterface` for vLLM's CPU paged cache: memory objects in
  LMCache's KV_2LTD format (`[2, layers, tokens, heads * head_size]`) are read out of the cache with the
  layout learnt from vLLM's own kernel (fxctl.integrations.vllm.cpu_layout.gather) and written back with that
  kernel (`cpu_attn_reshape_and_cache`);
- `FxCpuLMCacheConnector`, vLLM's own `LMCacheConnectorV1` with LMCache's connector factory answering
  with `CpuPagedConnector` on CPU (every other device keeps LMCache's own choice).

Everything else (chunking, hashing, lookup, the CPU pool, LocalDiskBackend, fxctl's tier plugin) is
LMCache's unchanged code. vLLM loads the class from `--kv-transfer-config`:
    {"kv_connector": "FxCpuLMCacheConnector", "kv_connector_module_path": "fxctl.integrations.vllm.cpu_connector",
     "kv_role": "kv_both"}
LMCache is imported only when vLLM builds the connector (importing it while vLLM registers plugins kills
the worker).
"""

from __future__ import annotations

import logging

import torch

from fxctl.integrations.vllm.cpu_layout import PageLayout, gather, kernel_write, learn_layout

log = logging.getLogger(__name__)
CONNECTOR_NAME = "FxCpuLMCacheConnector"
CONNECTOR_MODULE = __name__


class CpuPagedConnector:
    """Copies KV between vLLM's CPU paged cache (one tensor per layer) and LMCache memory objects.

    kwargs of every call (as LMCache's vLLM adapter passes them): `kvcaches` (the layers' tensors),
    `slot_mapping` (the whole sequence's slots); `vllm_cached_tokens` on loads.
    """

    def __init__(self, num_layers: int, num_kv_heads: int, head_size: int, dtype: torch.dtype,
                 use_mla: bool = False):
        if use_mla:
            raise ValueError("fxctl's CPU connector does not handle MLA caches")
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.dtype = dtype
        self.kvcaches: list[torch.Tensor] | None = None
        self._layout: PageLayout | None = None

    @classmethod
    def from_metadata(cls, metadata) -> CpuPagedConnector:
        num_layers, _, _, num_kv_heads, head_size = metadata.kv_shape
        return cls(num_layers, num_kv_heads, head_size, metadata.kv_dtype, metadata.use_mla)

    # -- LMCache's GPUConnectorInterface -------------------------------------------------------------
    def initialize_kvcaches_ptr(self, **kwargs) -> None:
        if "kvcaches" in kwargs:
            self.kvcaches = list(kwargs["kvcaches"])

    def get_shape(self, num_tokens: int) -> torch.Size:
        return torch.Size([2, self.num_layers, num_tokens, self.num_kv_heads * self.head_size])

    def layout(self) -> PageLayout:
        if self._layout is None:
            cache = self.caches()[0]
            _, heads, block_size, fused = cache.shape
            if heads != self.num_kv_heads or fused != 2 * self.head_size:
                raise ValueError(f"vLLM's cache {tuple(cache.shape)} does not match LMCache's metadata "
                                 f"({self.num_kv_heads} KV heads x {self.head_size})")
            self._layout = learn_layout(cache.dtype, block_size, self.head_size)
            log.info("fxctl CPU connector: vLLM KV layout learnt (%s, block %d, head %d, ISA %s)",
                     cache.dtype, block_size, self.head_size, self._layout.isa)
        return self._layout

    def caches(self) -> list[torch.Tensor]:
        if self.kvcaches is None:
            raise RuntimeError("kvcaches were never passed to the connector")
        return self.kvcaches

    def from_gpu(self, memory_obj, start: int, end: int, **kwargs) -> None:
        """vLLM's cache -> memory object (a store)."""
        self.initialize_kvcaches_ptr(**kwargs)
        layout = self.layout()
        slots = kwargs["slot_mapping"][start:end].long()
        out = memory_obj.tensor
        for layer, cache in enumerate(self.caches()):
            key, value = gather(cache, slots, layout)
            out[0, layer].copy_(key.reshape(end - start, -1))
            out[1, layer].copy_(value.reshape(end - start, -1))

    def to_gpu(self, memory_obj, start: int, end: int, **kwargs) -> None:
        """Memory object -> vLLM's cache (a load), skipping tokens vLLM already holds."""
        self.initialize_kvcaches_ptr(**kwargs)
        layout = self.layout()
        skip = min(end - start, max(0, kwargs.get("vllm_cached_tokens", 0) - start))
        if skip == end - start:
            return
        slots = kwargs["slot_mapping"][start + skip:end].long()
        data = memory_obj.tensor[:, :, skip:]
        shape = (end - start - skip, self.num_kv_heads, self.head_size)
        for layer, cache in enumerate(self.caches()):
            kernel_write(data[0, layer].reshape(shape).contiguous(), data[1, layer].reshape(shape).contiguous(),
                         cache, slots, layout.isa)

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs) -> None:
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.from_gpu(memory_obj, start, end, **kwargs)

    def batched_to_gpu(self, memory_objs, starts, ends, **kwargs) -> None:
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.to_gpu(memory_obj, start, end, **kwargs)


def install_cpu_connector_factory() -> None:
    """Make LMCache's connector factory answer with `CpuPagedConnector` for vLLM on CPU (idempotent)."""
    import lmcache.v1.gpu_connector as factory_module
    from lmcache import torch_device_type
    from lmcache.utils import EngineType

    original = factory_module.CreateGPUConnector
    if getattr(original, "fxctl_cpu", False):
        return

    def create(config, metadata, engine, layout_hints=None):
        if torch_device_type == "cpu" and engine == EngineType.VLLM and not config.use_layerwise:
            log.info("fxctl: LMCache on CPU uses fxctl's CPU paged-cache connector")
            return CpuPagedConnector.from_metadata(metadata)
        return original(config, metadata, engine, layout_hints=layout_hints)

    create.fxctl_cpu = True  # type: ignore[attr-defined]
    factory_module.CreateGPUConnector = create
    # LMCache's GPUConnectorInterface is an ABC: register ours so isinstance checks pass
    from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface
    GPUConnectorInterface.register(CpuPagedConnector)


def _connector_class():
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import LMCacheConnectorV1

    class FxCpuLMCacheConnector(LMCacheConnectorV1):
        """vLLM's LMCacheConnectorV1 with fxctl's CPU paged-cache connector installed first."""

        def __init__(self, vllm_config, role, kv_cache_config):
            install_cpu_connector_factory()
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)

    return FxCpuLMCacheConnector


def __getattr__(name: str):
    # vLLM resolves the class by name on this module; build it only then (vLLM imported, not LMCache)
    if name == CONNECTOR_NAME:
        cls = _connector_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
