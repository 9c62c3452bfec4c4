"""The plan's inputs as one profile: a base profile, the model read from a config.json, and the hardware
given on the command line, each replacing the profile's value with its own source. The same profile
feeds the arithmetic, the emulator, and `--write-profile` (what `fxctl serve` and `fxctl tune` take).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fxctl.errors import BadInput
from fxctl.plan.kv import dtype_bytes
from fxctl.plan.shape import ModelShape
from fxctl.sim.profile import Param, Profile

# GPU kinds: HBM per GPU (GB), HBM bandwidth (GB/s), dense FP8 TFLOPS (BF16 for 910B), from datasheets
GPUS = {
    "h100": ("NVIDIA H100 SXM", 80, 3350, 1979,
            "NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s, 1,979 TFLOPS FP8 dense"),
    "h200": ("NVIDIA H200 SXM", 141, 4800, 1979,
            "NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, 1,979 TFLOPS FP8 dense"),
    "b200": ("NVIDIA B200", 180, 8000, 4500,
            "NVIDIA DGX B200 datasheet: 180 GB HBM3e per GPU (1,440 GB in 8), 8 TB/s, 4.5 PFLOPS FP8 dense"),
    "mi300x": ("AMD Instinct MI300X", 192, 5300, 2615,
              "AMD MI300X datasheet: 192 GB HBM3, 5.3 TB/s, 2,615 TFLOPS FP8 dense"),
    "mi308x": ("AMD Instinct MI308X", 192, 5300, 688,
              "as the shipped mi308x profile: 192 GB HBM3, 5.3 TB/s, 688 TFLOPS FP8 (estimate)"),
    "910b": ("Huawei Ascend 910B", 64, 1600, 320,
            "Ascend 910B public specs: 64 GB HBM2e, 1.6 TB/s, ~320 TFLOPS FP16"),
}

# command-line names -> the profile parameter they set
HARDWARE_FLAGS = {
    "gpus": "gpu.count", "hbm_gb": "gpu.hbm_gb", "tp": "serving.tensor_parallel",
    "pp": "serving.pipeline_parallel", "gpu_memory_utilization": "serving.gpu_memory_utilization",
    "ssds": "tiers.l2_ssd_count", "ssd_read_gbs": "tiers.l2_ssd_read_gbs", "nic_gbits": "tiers.l2_link_gbits",
    "links": "tiers.l2_links", "weights_gb": "model.weight_bytes_gb",
}


@dataclass(frozen=True)
class Change:
    key: str          # section.key
    value: Any
    source: str


def with_changes(profile: Profile, changes: list[Change]) -> Profile:
    sections = {name: dict(params) for name, params in profile.sections.items()}
    for change in changes:
        section, key = change.key.split(".", 1)
        sections.setdefault(section, {})[key] = Param(change.value, change.source)
    return Profile(profile.name, profile.path, profile.description, profile.cost_model, sections,
                   dict(profile.calibration))


def model_changes(shape: ModelShape) -> list[Change]:
    src = f"{shape.source} (fxctl plan --model-config)"
    changes = [Change("model.name", shape.name, ""),
               Change("model.layers", shape.layers, f"{src}: num_hidden_layers"),
               Change("model.attention_heads", shape.attention_heads, f"{src}: num_attention_heads"),
               Change("model.kv_heads", shape.kv_heads, f"{src}: num_key_value_heads (MLA: 1 latent)"),
               Change("model.head_dim", shape.head_dim, f"{src}: head_dim (MLA: kv_lora_rank + qk_rope_head_dim)"),
               Change("model.weight_bytes_gb", round(shape.weight_gb, 1),
                      f"{src}: estimated from the shape ({shape.params_b:.1f} B parameters); --weights-gb overrides"),
               Change("model.active_params_b", round(shape.active_params_b, 2), f"{src}: estimated from the shape"),
               Change("model.experts", shape.experts, f"{src}: routed experts"),
               Change("model.experts_per_token", shape.experts_per_token, f"{src}: num_experts_per_tok"),
               Change("model.expert_weight_share", round(shape.expert_weight_share, 4), f"{src}: estimated")]
    if shape.mla:
        changes.append(Change("model.kv_latent_dim", shape.head_dim, f"{src}: kv_lora_rank + qk_rope_head_dim"))
    if shape.max_position:
        changes.append(Change("model.max_model_len", shape.max_position, ""))
    return changes


def kv_dtype_changes(kv_cache_dtype: str, shape: ModelShape) -> list[Change]:
    size = dtype_bytes(kv_cache_dtype, shape)
    changes = [Change("model.kv_dtype_bytes", size, f"fxctl plan --kv-dtype {kv_cache_dtype}")]
    if kv_cache_dtype != "auto":
        changes.append(Change("serving.kv_cache_dtype", kv_cache_dtype, ""))
    return changes


def gpu_changes(kind: str) -> list[Change]:
    if kind not in GPUS:
        raise BadInput(f"--gpu {kind!r} is not a GPU kind fxctl knows", "one of: " + ", ".join(GPUS)
                       + "; or give --hbm-gb (and keep the profile's compute figures)")
    name, hbm, bw, tflops, source = GPUS[kind]
    return [Change("gpu.name", name, ""), Change("gpu.hbm_gb", hbm, source),
            Change("gpu.hbm_bandwidth_gbs", bw, source), Change("gpu.peak_tflops", tflops, source)]


def hardware_changes(flags: dict[str, Any]) -> list[Change]:
    out = []
    for flag, value in flags.items():
        if value is None:
            continue
        key = HARDWARE_FLAGS[flag]
        out.append(Change(key, value, f"fxctl plan --{flag.replace('_', '-')} {value}"))
    return out


def check_layout(profile: Profile) -> None:
    gpus = profile.get("gpu", "count", 1)
    tp = profile.get("serving", "tensor_parallel", 1)
    pp = profile.get("serving", "pipeline_parallel", 1) or 1
    if gpus % (tp * pp):
        raise BadInput(f"{gpus} GPUs do not split into instances of TP {tp} x PP {pp}",
                       "give --gpus as a multiple of --tp x --pp")
