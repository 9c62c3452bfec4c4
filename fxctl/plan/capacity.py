"""What fits where, by arithmetic on a profile: HBM per GPU, the tiers for a reuse window, the L2 read rate
a cold recovery needs to meet a TTFT target, and the SSDs and links that give it. Pure: no emulator here
(fxctl.plan.predict runs it); every figure is returned with what it was computed from.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from fxctl.plan.kv import KvLayout
from fxctl.sim.connector import tier_rates
from fxctl.sim.profile import Profile
from fxctl.units import GB


@dataclass(frozen=True)
class Ask:
    """What the user plans for: per instance, `concurrency` requests of `context` tokens at once."""

    context: int
    concurrency: int
    reuse_window: int              # recent contexts that should come back without recompute (L2 holds them)
    l1_rounds: int = 4             # L1 holds the contexts of the last rounds (seed: 3-5 rounds)
    output_tokens: int = 64
    host_dram_gb: float | None = None
    ssd_write_gbs: float | None = None


@dataclass
class Hbm:
    hbm_gb: float                  # per GPU
    usable_gb: float               # x gpu_memory_utilization
    weights_gb: float              # per GPU (weights / TP / PP)
    activation_gb: float
    kv_space_gb: float             # per GPU, what vLLM's KV pool gets
    kv_tokens: int                 # tokens of KV the instance holds (each GPU its share of every token)
    max_model_len: int             # the longest request that fits (and the model allows)
    max_concurrency: int           # requests of `context` tokens that fit at once
    needed_gb: float               # per GPU, for `concurrency` x `context`
    fits: bool
    in_use_pct: float              # HBM held by weights + activations before any KV
    explanation: str = ""


@dataclass
class Tiers:
    context_gb: float              # one context's KV as a tier stores it
    l1_contexts: int
    l1_gb: float                   # per instance (LMCache's MP server: one pool per host)
    l1_per_rank_gb: float          # LMCache in-process (no MP): max_local_cpu_size is per TP rank
    l2_contexts: int
    l2_gb: float
    notes: list[str] = field(default_factory=list)


@dataclass
class Bandwidth:
    ttft_target_s: float | None
    burst_gb: float                # `concurrency` contexts restored at once (a cold recovery)
    needed_gbs: float | None       # aggregate L2 read rate for the burst within the target
    per_request_gbs: float | None  # one request's restore within the target
    request_cap_gbs: float         # the profile's per-request read rate (bounded parallelism per request)
    array_gbs: float               # SSDs x read rate x read efficiency
    link_gbs: float                # links x rate x protocol efficiency
    ssds_needed: int | None
    links_needed: int | None
    ssd_gbs: float = 0.0           # one SSD's share of array_gbs, one link's of link_gbs
    one_link_gbs: float = 0.0
    notes: list[str] = field(default_factory=list)


def hbm(profile: Profile, kv: KvLayout, ask: Ask) -> Hbm:
    gpus = kv.tensor_parallel * kv.pipeline_parallel
    per_gpu = profile.get("gpu", "hbm_gb")
    usable = per_gpu * profile.get("serving", "gpu_memory_utilization", 0.9)
    weights = profile.get("model", "weight_bytes_gb") / gpus
    activation = profile.get("serving", "activation_reserve_gb", 0)
    space = max(usable - weights - activation, 0.0)
    tokens = int(space * GB // kv.per_gpu_bytes)
    longest = min(tokens, profile.get("model", "max_model_len") or tokens)
    needed = ask.concurrency * ask.context * kv.per_gpu_bytes / GB
    out = Hbm(per_gpu, usable, weights, activation, space, tokens, longest,
              tokens // ask.context if ask.context else 0, needed,
              needed <= space and ask.context + ask.output_tokens <= longest, 100 * (weights + activation) / per_gpu)
    out.explanation = explain(out, ask, profile)
    return out


def explain(h: Hbm, ask: Ask, profile: Profile) -> str:
    """The seed's first paradox in numbers: memory looks free, yet the setting runs out."""
    gmu = profile.get("serving", "gpu_memory_utilization", 0.9)
    looks_free = h.hbm_gb - h.weights_gb - h.activation_gb
    if h.kv_space_gb <= 0:
        return (f"the weights ({h.weights_gb:.1f} GB per GPU) and activations ({h.activation_gb:.1f} GB) leave "
                f"no KV space in {h.usable_gb:.1f} GB ({gmu:g} x {h.hbm_gb:g} GB): raise TP or the GPU count")
    model_limit = profile.get("model", "max_model_len") or h.kv_tokens
    if ask.context + ask.output_tokens > model_limit:
        return (f"the model takes at most {model_limit:,} tokens per request (model.max_model_len / the config's "
                f"max_position_embeddings); {ask.context:,} + {ask.output_tokens} output tokens is more")
    if h.fits:
        return (f"fits: {ask.concurrency} x {ask.context:,} tokens need {h.needed_gb:.1f} GB of KV per GPU, "
                f"vLLM's pool has {h.kv_space_gb:.1f} GB ({h.max_concurrency:,} such requests at once)")
    if ask.context > h.kv_tokens:
        return (f"runs out: one {ask.context:,}-token request needs more KV than the pool holds "
                f"({h.kv_tokens:,} tokens); vLLM refuses to start with max_model_len {ask.context:,} although only "
                f"{h.in_use_pct:.0f} % of HBM is taken by weights and activations")
    return (f"runs out while memory looks free: weights and activations take {h.in_use_pct:.0f} % of HBM "
            f"({h.weights_gb + h.activation_gb:.1f} of {h.hbm_gb:g} GB per GPU, so {looks_free:.1f} GB look free), "
            f"but {ask.concurrency} x {ask.context:,} tokens need {h.needed_gb:,.1f} GB of KV per GPU and vLLM's pool "
            f"is {h.kv_space_gb:.1f} GB ({gmu:g} x HBM - weights - activations): only {h.max_concurrency} fit at "
            f"once; the rest wait or are preempted and recomputed")


def tiers(profile: Profile, kv: KvLayout, ask: Ask) -> Tiers:
    context_gb = ask.context * kv.stored_bytes / GB
    l1_contexts = min(ask.reuse_window, ask.l1_rounds * ask.concurrency)
    l1 = l1_contexts * context_gb
    notes = []
    if ask.host_dram_gb is not None and l1 > ask.host_dram_gb * 0.8:
        fit = int(ask.host_dram_gb * 0.8 // context_gb) if context_gb else 0
        notes.append(f"L1 for {l1_contexts} contexts ({l1:.0f} GB) exceeds 80 % of the host's {ask.host_dram_gb:g} GB "
                     f"DRAM: L1 capped at {fit} contexts; the rest come from L2")
        l1_contexts, l1 = fit, fit * context_gb
    if kv.tensor_parallel > 1:
        notes.append(f"LMCache in-process (no MP server) sizes max_local_cpu_size per TP rank: "
                     f"{l1 / kv.tensor_parallel:.1f} GB each, {kv.tensor_parallel} x that in all; "
                     f"fxctl's MP server keeps one {l1:.0f} GB pool per host")
    return Tiers(context_gb, l1_contexts, l1, l1 / kv.tensor_parallel, ask.reuse_window,
                 ask.reuse_window * context_gb, notes)


def bandwidth(profile: Profile, kv: KvLayout, ask: Ask, ttft_target_s: float | None) -> Bandwidth:
    """The L2 read rate a cold recovery of `concurrency` contexts needs, from the emulator's own rates
    (fxctl.sim.connector.tier_rates: one formula for the array, the links and the per-request cap)."""
    rates = tier_rates(profile, "fxctl")
    context_gb = ask.context * kv.stored_bytes / GB
    burst = ask.concurrency * context_gb
    ssd, one_link = rates.array_bps / rates.ssds / GB, rates.link_bps / rates.links / GB
    cap = rates.l2_request_bps / GB
    out = Bandwidth(ttft_target_s, burst, None, None, cap, rates.array_bps / GB, rates.link_bps / GB,
                    None, None, ssd_gbs=ssd, one_link_gbs=one_link)
    if ask.ssd_write_gbs is not None:
        out.notes.append(f"writes: the array takes {rates.ssds * ask.ssd_write_gbs:.1f} GB/s; "
                         "the write-behind rate needed is in the prediction")
    if not ttft_target_s:
        return out
    out.needed_gbs = burst / ttft_target_s
    out.per_request_gbs = context_gb / ttft_target_s
    out.ssds_needed = max(1, math.ceil(out.needed_gbs / ssd))
    out.links_needed = max(1, math.ceil(out.needed_gbs / one_link))
    if out.per_request_gbs > cap:
        out.notes.append(f"one request's restore of {context_gb:.1f} GB takes {context_gb / cap:.1f} s at the "
                         f"per-request read rate ({cap:.2f} GB/s: tiers.l2_request_read_gbs x read efficiency), "
                         f"longer than the {ttft_target_s:g} s target whatever the SSDs and links; a shorter "
                         f"context, more parallel reads per request, or L1 hits are what help")
    return out


def as_dict(*parts) -> dict:
    return {type(p).__name__.lower(): asdict(p) for p in parts}
