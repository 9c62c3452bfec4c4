"""KV bytes per token as vLLM allocates them (vllm/v1/kv_cache_interface.py, vllm/config/model.py).

Per layer, a block of `block_size` tokens is `2 x block_size x kv_heads_per_rank x head_size x dtype`
(K and V) for full attention, and `block_size x 1 x (kv_lora_rank + qk_rope_head_dim) x dtype` for MLA
(one latent, no V), which every tensor-parallel rank keeps whole. A rank holds
`max(1, kv_heads // TP)` KV heads (replicated when TP exceeds the KV heads) and `layers / PP` layers.
`fp8_ds_mla` (DeepSeek-V3.2 sparse MLA) stores 656 bytes per layer per token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fxctl.errors import BadInput
from fxctl.plan.shape import DTYPE_BYTES, ModelShape

# --kv-cache-dtype values and their bytes per element (None: the model's dtype, as vLLM's "auto")
KV_CACHE_DTYPES = {"auto": None, "bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1,
                   "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1}
FP8_DS_MLA_BYTES_PER_LAYER = 656   # 512 fp8 latent + 4 x 4-byte scales + 64 x 2-byte rope (vLLM's layout)


@dataclass(frozen=True)
class KvLayout:
    """What one token's KV costs: on each GPU (the HBM planning figure) and stored once (L1/L2)."""

    kv_cache_dtype: str
    dtype_bytes: int
    heads_per_rank: int
    layers_per_rank: int
    head_size: int
    tensor_parallel: int
    pipeline_parallel: int
    mla: bool
    per_gpu_bytes: int        # one token's KV on one GPU
    instance_bytes: int       # the same token over every GPU of the instance (replicas counted)
    stored_bytes: int         # what a KV tier holds per token (MLA's latent once; GQA's heads once each)

    def to_dict(self) -> dict:
        return dict(vars(self))


def dtype_bytes(kv_cache_dtype: str, shape: ModelShape) -> int:
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise BadInput(f"--kv-dtype {kv_cache_dtype!r} is not a vLLM KV cache dtype",
                       "one of: " + ", ".join(KV_CACHE_DTYPES))
    if kv_cache_dtype == "fp8_ds_mla" and not shape.mla:
        raise BadInput("--kv-dtype fp8_ds_mla is for MLA models (DeepSeek-V3.2) only",
                       "use fp8 for this model")
    fixed = KV_CACHE_DTYPES[kv_cache_dtype]
    return fixed or DTYPE_BYTES.get(shape.model_dtype, 2)


def kv_layout(shape: ModelShape, kv_cache_dtype: str = "auto", tensor_parallel: int = 1,
              pipeline_parallel: int = 1) -> KvLayout:
    if tensor_parallel < 1 or pipeline_parallel < 1:
        raise BadInput("tensor and pipeline parallel sizes are at least 1", "e.g. --tp 8 --pp 1")
    size = dtype_bytes(kv_cache_dtype, shape)
    layers = math.ceil(shape.layers / pipeline_parallel)
    heads = 1 if shape.mla else max(1, shape.kv_heads // tensor_parallel)
    if shape.mla:
        per_layer = FP8_DS_MLA_BYTES_PER_LAYER if kv_cache_dtype == "fp8_ds_mla" else shape.head_dim * size
    else:
        per_layer = 2 * heads * shape.head_dim * size
    per_gpu = layers * per_layer
    all_layers = shape.layers * per_layer
    stored = all_layers if shape.mla else shape.layers * 2 * shape.kv_heads * shape.head_dim * size
    return KvLayout(kv_cache_dtype, size, heads, layers, shape.head_dim, tensor_parallel, pipeline_parallel,
                    shape.mla, per_gpu, all_layers * tensor_parallel, stored)
