"""The GPU cost model: how long one engine step takes, and how much KV fits in HBM.

Roofline per step: compute time (linear FLOPs + attention's quadratic term over effective compute) against
memory time (weights touched + KV read over effective HBM bandwidth); the step takes the larger, plus a
fixed per-step overhead. Times are model seconds (simulated GPU time), never measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.errors import BadInput
from fxctl.plan.kv import KvLayout
from fxctl.plan.kv import kv_layout as plan_kv_layout
from fxctl.plan.shape import from_profile, kv_dtype_of
from fxctl.sim.profile import Profile
from fxctl.units import GB  # noqa: F401 (GB: imported from here by older callers)


@dataclass(frozen=True)
class ScheduledWork:
    """One request's share of a step: `new_tokens` computed on top of `context` tokens already in HBM."""

    new_tokens: int
    context: int
    prefill: bool = False


@dataclass(frozen=True)
class RooflineModel:
    gpus: int
    weight_bytes: float
    dense_weight_bytes: float
    expert_weight_bytes: float
    expert_hit_prob: float           # experts_per_token / experts: chance one token uses a given expert
    flops_per_token: float           # linear layers: 2 x active parameters
    attn_flops_coeff: float          # 4 x layers x heads x head_dim: attention FLOPs per (query, key) pair
    kv_bytes_per_token: float
    effective_flops: float           # FLOP/s over the instance's GPUs
    effective_hbm_bw: float          # bytes/s over the instance's GPUs
    step_overhead_s: float

    def step_seconds(self, work: list[ScheduledWork]) -> float:
        if not work:
            return 0.0
        tokens = sum(w.new_tokens for w in work)
        attn = sum(self.attn_flops_coeff * w.new_tokens * (w.context + w.new_tokens / 2) for w in work)
        compute_s = (self.flops_per_token * tokens + attn) / self.effective_flops
        kv_read = sum(w.context + w.new_tokens for w in work) * self.kv_bytes_per_token
        memory_s = (self.weights_touched(tokens) + kv_read) / self.effective_hbm_bw
        return max(compute_s, memory_s) + self.step_overhead_s

    def weights_touched(self, tokens: int) -> float:
        """Bytes of weights one step reads: dense layers always, each expert if any token routes to it."""
        share = 1.0 - (1.0 - self.expert_hit_prob) ** max(tokens, 1)
        return self.dense_weight_bytes + self.expert_weight_bytes * share


@dataclass(frozen=True)
class FixedDelayModel:
    """Known delays for testing load generators: a prefill step costs ttft, a decode-only step tpot."""

    ttft_s: float
    tpot_s: float
    kv_bytes_per_token: float = 1.0

    def step_seconds(self, work: list[ScheduledWork]) -> float:
        if not work:
            return 0.0
        prefill = any(w.prefill for w in work)
        return self.ttft_s if prefill else self.tpot_s


def kv_layout(profile: Profile) -> KvLayout:
    """vLLM's KV layout for the profile's model at its tensor parallelism (fxctl.plan.kv: one formula)."""
    shape = from_profile(profile)
    return plan_kv_layout(shape, kv_dtype_of(profile), instance_gpus(profile))


def kv_bytes_per_token(profile: Profile) -> float:
    """One token's KV as a tier stores it (every layer; GQA's KV heads once each, MLA's latent once);
    nominal 1 KiB for fixed delays."""
    if profile.cost_model == "fixed":
        return 1024.0
    return float(kv_layout(profile).stored_bytes)


def instance_gpus(profile: Profile) -> int:
    return int(profile.get("serving", "tensor_parallel", 1))


def roofline_model(profile: Profile) -> RooflineModel:
    gpus = instance_gpus(profile)
    weights = profile.get("model", "weight_bytes_gb") * GB
    expert_share = profile.get("model", "expert_weight_share")
    experts = profile.get("model", "experts")
    m = lambda key: profile.get("model", key)  # noqa: E731
    return RooflineModel(
        gpus=gpus,
        weight_bytes=weights,
        dense_weight_bytes=weights * (1 - expert_share),
        expert_weight_bytes=weights * expert_share,
        expert_hit_prob=m("experts_per_token") / experts if experts else 1.0,
        flops_per_token=2 * m("active_params_b") * 1e9,
        attn_flops_coeff=4 * m("layers") * m("attention_heads") * m("head_dim"),
        kv_bytes_per_token=kv_layout(profile).instance_bytes,   # HBM read per token, all ranks
        effective_flops=gpus * profile.get("gpu", "peak_tflops") * 1e12 * profile.get("efficiency", "prefill_mfu"),
        effective_hbm_bw=gpus * profile.get("gpu", "hbm_bandwidth_gbs") * GB
        * profile.get("efficiency", "hbm_bandwidth_efficiency"),
        step_overhead_s=profile.get("efficiency", "step_overhead_ms") / 1000,
    )


def cost_model(profile: Profile) -> RooflineModel | FixedDelayModel:
    if profile.cost_model == "fixed":
        return FixedDelayModel(profile.get("fixed_delays", "ttft_ms", 0) / 1000,
                               profile.get("fixed_delays", "tpot_ms", 0) / 1000)
    return roofline_model(profile)


def hbm_kv_blocks(profile: Profile) -> int:
    """(HBM per GPU x gpu_memory_utilization - weights per GPU - activations) / one token's KV on a GPU,
    in blocks: vLLM sizes its KV pool per rank, and every rank holds its share of every token."""
    block = profile.get("serving", "block_size", 16)
    override = profile.get("serving", "num_gpu_blocks")
    if override:
        return int(override)
    if profile.cost_model == "fixed":
        return 4096
    gpus = instance_gpus(profile)
    per_gpu = profile.get("gpu", "hbm_gb") * GB * profile.get("serving", "gpu_memory_utilization", 0.9)
    free = per_gpu - profile.get("model", "weight_bytes_gb") * GB / gpus \
        - profile.get("serving", "activation_reserve_gb") * GB
    if free <= 0:
        raise BadInput(f"{profile.path}: the weights do not fit in HBM at this tensor parallelism",
                       "raise serving.tensor_parallel or gpu_memory_utilization")
    return int(free // (kv_layout(profile).per_gpu_bytes * block))
