"""Prometheus text exposition (format 0.0.4, written by prometheus_client) of the emulator's state, with vLLM's
metric names.

vLLM-style: vllm:num_requests_running/waiting, vllm:kv_cache_usage_perc, vllm:prefix_cache_queries/hits
(tokens), vllm:num_preemptions, token counters and latency histograms. fxctl's own: per-tier hits,
misses (chunks), bytes read and chunks held, and fxctl_sim_info saying that this is an emulator.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from fxctl.sim.engine import Engine
from fxctl.sim.stats import TIERS, Histogram


class Exposition:
    """The families of one scrape, written by prometheus_client (generate_latest) as one collector."""

    def __init__(self):
        self.families: list = []

    def metric(self, name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        labels = list(samples[0][0]) if samples else []
        family = cls(name, help_text, labels=labels)
        for label_values, value in samples:
            family.add_metric([str(v) for v in label_values.values()], value)
        self.families.append(family)

    def histogram(self, name: str, help_text: str, hist: Histogram, base: dict[str, str]) -> None:
        family = HistogramMetricFamily(name, help_text, labels=list(base))
        cumulative, buckets = 0, []
        for bound, count in zip(hist.buckets, hist.counts):
            cumulative += count
            buckets.append((repr(float(bound)), cumulative))
        buckets.append(("+Inf", hist.count))
        family.add_metric(list(base.values()), buckets, hist.total)
        self.families.append(family)

    def collect(self):
        return self.families

    def text(self) -> str:
        return generate_latest(self).decode()


def labels(**pairs) -> dict[str, str]:
    return {k: str(v) for k, v in pairs.items()}


def render_metrics(engine: Engine, model_name: str, profile_name: str, time_scale: float) -> str:
    s = engine.stats
    m = {"model_name": model_name}
    out = Exposition()
    out.metric("fxctl_sim_info", "gauge", "fxctl sim is an emulator: GPU timing is simulated (model time)",
               [(labels(profile=profile_name, offload=str(engine.offload).lower(), time_scale=str(time_scale),
                        timing="simulated"), 1)])
    out.metric("fxctl_sim_model_time_seconds", "gauge", "Emulator clock (model seconds)",
               [(labels(**m), engine.now)])
    out.metric("vllm:num_requests_running", "gauge", "Requests in the running batch",
               [(labels(**m), len(engine.running))])
    out.metric("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled (incl. KV loads)",
               [(labels(**m), len(engine.waiting) + len(engine.loading))])
    out.metric("fxctl_sim_requests_loading", "gauge", "Requests waiting for KV from L1/L2",
               [(labels(**m), len(engine.loading))])
    usage = engine.pool.usage()
    out.metric("vllm:kv_cache_usage_perc", "gauge", "KV cache usage (1 = 100 %)", [(labels(**m), usage)])
    out.metric("vllm:gpu_cache_usage_perc", "gauge", "KV cache usage (older vLLM name)", [(labels(**m), usage)])
    out.metric("fxctl_sim_gpu_blocks", "gauge", "HBM KV blocks in the pool", [(labels(**m), engine.pool.num_blocks)])
    out.metric("vllm:prefix_cache_queries", "counter", "Prefix cache queries, in tokens",
               [(labels(**m), s.prefix_queries)])
    out.metric("vllm:prefix_cache_hits", "counter", "Prefix cache hits, in tokens", [(labels(**m), s.prefix_hits)])
    out.metric("vllm:num_preemptions", "counter", "Preemptions (recompute)", [(labels(**m), s.preemptions)])
    out.metric("vllm:prompt_tokens", "counter", "Prompt tokens processed", [(labels(**m), s.prompt_tokens)])
    out.metric("vllm:generation_tokens", "counter", "Tokens generated", [(labels(**m), s.generation_tokens)])
    out.metric("vllm:request_success", "counter", "Finished requests",
               [(labels(**m, finished_reason="length"), s.requests_finished)])
    out.histogram("vllm:time_to_first_token_seconds", "TTFT (model seconds)", s.ttft, m)
    out.histogram("vllm:time_per_output_token_seconds", "Time per output token (model seconds)", s.tpot, m)
    out.histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency (model seconds)", s.e2e, m)
    chunks = engine.tiers.chunk_counts()
    out.metric("fxctl_tier_hits", "counter", "Chunks found in the tier",
               [(labels(tier=t), s.tier_hits[t]) for t in TIERS])
    out.metric("fxctl_tier_misses", "counter", "Chunks looked up and not found",
               [(labels(tier=t), s.tier_misses[t]) for t in TIERS])
    out.metric("fxctl_tier_read_bytes", "counter", "Bytes of KV read from the tier (model bytes)",
               [(labels(tier=t), s.tier_read_bytes[t]) for t in TIERS])
    out.metric("fxctl_tier_stored_chunks", "counter", "Chunks offloaded into the tier",
               [(labels(tier=t), s.tier_stored_chunks[t]) for t in TIERS])
    out.metric("fxctl_tier_chunks", "gauge", "Chunks the tier holds now", [(labels(tier=t), chunks[t]) for t in TIERS])
    return out.text()
