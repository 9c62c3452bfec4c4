"""Real cold recovery on this machine: vLLM (on CPU) restarted between storing and re-reading the prompts' KV.

Deployments of the same engine, model and prompts, one after another, each through `fxctl serve`:
  recompute         no offload: after a restart every prompt is prefilled again;
  fxctl             fxctl's tier as the L2 adapter of LMCache's MP server (what `fxctl serve` deploys);
  fs-native, fs, raw-block   LMCache's own persistent L2 adapters in the same MP server, started the same
                    way with only `--l2-adapter` changed (fs_native and fs with O_DIRECT and LRU eviction,
                    raw_block on a preallocated file): the anchors a user would pick for KV that survives;
  floor             fxctl's deployment, not restarted: the prompts answered again from vLLM's own prefix
                    cache, the engine's cost with no KV to move (what a tier's TTFT after a restart is measured
                    against), in the same engine configuration as the tiers' (a no-offload vLLM runs another
                    path here: its prefill took 1.8x as long and its logprobs differ by up to 1.16);
  lmcache-disk      LMCache's in-process LocalDiskBackend (its index lives in memory: it finds nothing after a
                    restart; kept as a labelled historical row);
  fxctl-in-process  fxctl's tier as LMCache's in-process storage plugin, under fxctl's CPU connector.
For each: start, send every prompt once (phase 1: the tiers fill), restart the serving processes (phase 2:
vLLM, LMCache and the tier all start again), send the same prompts again and measure them (phase 3),
stop. All of them are timed by the same load generator (fxctl.loadgen.generator) with the same prompts (a
fixed nonce), concurrency and output length, greedy decoding with logprobs. Reported as R2 reports cold
recovery: TTFT p50, output tok/s, gain against recompute; plus the share of the prompt tokens a
connector can supply that vLLM got from its KV connector (vLLM's own external prefix-cache counters;
vLLM always computes each prompt's last token itself, for the logits of the first output token), and
whether each variant's outputs after the restart match those the same deployment computed from scratch in
phase 1 (the same greedy text, every logprob within LOGPROB_TOLERANCE: see outputs_match), and how far they
are from the no-offload deployment's (vLLM's numerics differ slightly between a deployment with a KV
connector and one without, whatever the connector serves).
Verification runs after every timer.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from fxctl.errors import FxError
from fxctl.serve.roles import Role

# variant -> (offload, LMCache mode): fxctl's tier in LMCache's MP server (the default deployment) and as
# the in-process plugin behind fxctl's CPU connector (the path LMCache's own disk tier takes)
VARIANTS = {"recompute": ("none", None), "fxctl": ("fxctl", "mp"), "fs-native": ("lmcache-fs-native", "mp"),
            "fs": ("lmcache-fs", "mp"), "raw-block": ("lmcache-raw-block", "mp"), "floor": ("fxctl", "mp"),
            "lmcache-disk": ("lmcache-disk", "in-process"), "fxctl-in-process": ("fxctl", "in-process")}
DEFAULT_VARIANTS = ("recompute", "fxctl", "fs-native", "fs", "raw-block", "floor")   # the rest on request
NO_RESTART = ("floor",)   # measured from vLLM's prefix cache: nothing restarted, nothing evicted
NONCE = 20261201          # the same prompts for every variant
# How far an output logprob after the restart may be from the same deployment's own from-scratch run. With a
# prefix from a cache, vLLM attends over the loaded prefix and computes the rest after it: the sums run in
# another order than one prefill's. On CPUs with AVX-512 vLLM's CPU kernels gave identical bits (earlier
# runs); on one without (AVX2 only, 2026-12-02) the 8th output token's logprob moved by 0.0061 with the KV
# restored byte for byte (tests/vllm/test_serve_real.py), the same on the landed code. A wrong KV changes the
# greedy text (the tiny model's wide init, serving facts), which outputs_match compares exactly.
LOGPROB_TOLERANCE = 0.02
LABEL = "real vLLM on CPU, tiny model"


@dataclass(frozen=True)
class ColdRestartSpec:
    python: str                      # the serving env's interpreter
    model: str                       # a model folder (the tiny model)
    l2_dir: str                      # scratch for the tiers (each variant gets a fresh subfolder)
    profile: str = "cpu-tiny"
    prompts: int = 4
    prompt_tokens: int = 3072
    output_tokens: int = 16
    concurrency: int = 1
    port: int = 8100
    ready_timeout_s: float = 900.0
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    repeats: int = 1
    replicas: int = 1                # > 1: that many vLLM behind `fxctl serve`'s router; the load goes through it
    router_policy: str | None = None


def model_vocab(model_dir: str) -> int | None:
    try:
        return int(json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError):
        return None


def deployment_settings(spec: ColdRestartSpec, variant: str):
    from fxctl.serve.deploy import local_state_dir
    from fxctl.serve.settings import settings_from
    from fxctl.sim.profile import load_profile

    offload, mode = VARIANTS[variant]
    return settings_from(load_profile(spec.profile), name=f"cold-{variant}", offload=offload, lmcache_mode=mode,
                         model=spec.model, python=spec.python, l2_dir=spec.l2_dir, port=spec.port,
                         state_dir=local_state_dir(), instances=spec.replicas, router_policy=spec.router_policy)


def keep_everything() -> dict:
    """The floor's phase 2: nothing evicted, so phase 3 is served from vLLM's own prefix cache."""
    return {"kept": "vLLM's prefix cache (the floor: no restart, nothing evicted)"}


def restart(settings, ready_timeout_s: float) -> Callable[[], dict]:
    """Phase 2: restart every process of the deployment (vLLM, LMCache, the tier) and wait until ready."""
    from fxctl.serve import deploy

    def evict() -> dict:
        started = time.perf_counter()
        outcome = deploy.restart(deploy.Where(), settings.state_dir, settings.name,
                                 ready_timeout=ready_timeout_s)["local"]
        if not outcome.ok:
            raise FxError(f"restarting {settings.name} failed: {outcome.error}", outcome.hint)
        return {"restarted": settings.name, "seconds": round(time.perf_counter() - started, 1)}
    return evict


def run_variant(spec: ColdRestartSpec, variant: str, progress: Callable[[str], None]) -> dict:
    from fxctl.loadgen.generator import LoadSpec
    from fxctl.loadgen.generator import run as run_load
    from fxctl.loadgen.workloads import WorkloadSpec
    from fxctl.serve import deploy
    from fxctl.serve.render import plan_instances
    from fxctl.serve.router import router_port, wanted

    settings = deployment_settings(spec, variant)
    for folder in [f"{settings.l2_dir}/{settings.name}-{i}" for i in range(spec.replicas)] + \
            [f"{settings.l2_dir}/{settings.name}-mp"]:
        shutil.rmtree(folder, ignore_errors=True)   # every variant starts empty
    progress(f"{variant}: starting vLLM ({settings.offload} offload, LMCache {settings.lmcache_mode or 'none'})")
    started = deploy.start(settings, deploy.Where(), ready_timeout=spec.ready_timeout_s)["local"]
    if not started.ok:
        raise FxError(f"starting {settings.name} failed: {started.error}", started.hint)
    try:
        progress(f"{variant}: fill, restart, measure")
        workload = WorkloadSpec("cold-recovery", spec.prompt_tokens, spec.prompt_tokens, 0.0, spec.output_tokens,
                                vocab=model_vocab(spec.model), logprobs=True)
        plans = plan_instances(settings, "local")
        server = [p for p in plans if p.is_server and p.metrics_port]
        routed = wanted(settings, 1)
        engines = [p for p in plans if p.role == Role.ENGINE]
        url = f"http://127.0.0.1:{router_port(settings) if routed else spec.port}"
        result = run_load(LoadSpec(url, workload, concurrency=spec.concurrency,
                                   requests=spec.prompts, nonce=NONCE, time_limit_s=1800.0,
                                   evict=keep_everything if variant in NO_RESTART
                                   else restart(settings, spec.ready_timeout_s),
                                   tier_metrics=tuple(f"http://127.0.0.1:{p.metrics_port}/metrics" for p in server),
                                   replicas=tuple(f"http://127.0.0.1:{p.port}" for p in engines) if routed else ()))
        if routed:
            spread_over_replicas(result, engines, router_port(settings) + 1)
    finally:
        deploy.stop(deploy.Where(), settings.state_dir, settings.name)
    return result


def spread_over_replicas(result: dict, engines: list, router_metrics_port: int) -> None:
    """Behind the router, what each replica served after the restart (its counters started with its process
    at the restart, so they hold the measured phase only) and how the router spread the requests (the
    connector's share over all replicas is the load generator's: it scrapes every replica)."""
    import urllib.request

    from fxctl.serve.replica_metrics import engine_counters, hit_rates, router_counters

    def page(port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            return answer.read().decode()

    rows = [{"port": p.port, **engine_counters(page(p.port))} for p in engines]
    for row in rows:
        row.update(hit_rates(row))
    result["replicas"] = rows
    result["router"] = router_counters(page(router_metrics_port))


def compare(results: dict[str, dict]) -> list[dict]:
    """One row per variant: R2's cold-recovery figures, the external-KV share, outputs against recompute."""
    base = results.get("recompute")
    floor = results.get("floor")
    rows = []
    for variant, result in results.items():
        external = (result.get("tier_hits") or {}).get("external") or {}
        # vLLM computes the last prompt token of every request itself (its logits give the first output token),
        # so a connector can supply at most query_tokens - requests of what vLLM asked it for
        retrievable = external.get("query_tokens", 0.0) - result["completed"]
        hits = external.get("hit_tokens", 0.0)
        row = {"variant": variant, "ttft_p50_s": result["median_ttft_ms"] / 1000,
               "output_tok_s": result["output_throughput"], "completed": result["completed"],
               "failed": result["failed"], "first_ttft_s": first_ttft(result),
               "kv_from_connector": min(1.0, hits / retrievable) if retrievable > 0 else 0.0,
               "kv_tokens_from_connector": hits, "kv_tokens_asked": external.get("query_tokens", 0.0),
               # fxctl's own count, where its tier exports one (MP mode): chunks served from L2 after the restart
               "tier_l2_hits": ((result.get("tier_hits") or {}).get("l2") or {}).get("hits")}
        if base is not None:
            row["ttft_gain"] = base["median_ttft_ms"] / result["median_ttft_ms"] if result["median_ttft_ms"] else None
            row["ttft_ratio"] = result["median_ttft_ms"] / base["median_ttft_ms"] if base["median_ttft_ms"] else None
            row["output_gain"] = (result["output_throughput"] / base["output_throughput"] - 1
                                  if base["output_throughput"] else None)
            row["logprobs_max_diff_vs_recompute"] = max_diff(result.get("logprobs"), base.get("logprobs"))
        if floor is not None and floor["median_ttft_ms"]:
            row["ttft_vs_floor"] = result["median_ttft_ms"] / floor["median_ttft_ms"]
            row["first_ttft_vs_floor"] = first_ttft(result) / first_ttft(floor) if first_ttft(floor) else None
        # the same deployment computed every prompt from scratch in phase 1 (nothing stored yet): after the
        # restart its outputs must match, whatever served the KV
        fill = result["phases"]["fill"]
        row["logprobs_max_diff_vs_fill"] = max_diff(result.get("logprobs"), fill.get("logprobs"))
        row["outputs_match_recompute"] = outputs_match(result.get("texts"), result.get("logprobs"),
                                                       fill.get("texts"), fill.get("logprobs"))
        rows.append(row)
    return rows


def first_ttft(result: dict) -> float | None:
    """TTFT of the first prompt sent after the restart (the one that finds the tier cold), seconds."""
    ttfts = result.get("ttfts") or {}
    return ttfts[min(ttfts)] if ttfts else None


def outputs_match(texts: dict | None, logprobs: dict | None, their_texts: dict | None,
                  their_logprobs: dict | None) -> bool:
    """The same greedy text for every prompt and every logprob within LOGPROB_TOLERANCE of theirs."""
    diff = max_diff(logprobs, their_logprobs)
    return bool(texts) and texts == their_texts and diff is not None and diff <= LOGPROB_TOLERANCE


def max_diff(ours: dict | None, theirs: dict | None) -> float | None:
    """Largest |difference| between two runs' output logprobs, prompt by prompt (None: not comparable)."""
    if not ours or not theirs or set(ours) != set(theirs) or any(len(ours[i]) != len(theirs[i]) for i in ours):
        return None
    return max(abs(a - b) for i in ours for a, b in zip(ours[i], theirs[i], strict=True))


def orders(variants: tuple[str, ...], repeats: int) -> list[tuple[str, ...]]:
    """The variants' order in each repeat, rotated so that each takes every position (the machine's load
    drifts over a run: a fixed order would hand one variant the quiet minutes)."""
    return [variants[r % len(variants):] + variants[:r % len(variants)] for r in range(repeats)]


def summarize_repeats(per_repeat: list[list[dict]]) -> list[dict]:
    """One row per variant over the repeats: medians (with min and max) of each repeat's own figures and
    same-repeat ratios; the worst connector share; outputs match only if they match in every repeat."""
    from statistics import median

    rows = []
    for variant in [row["variant"] for row in per_repeat[0]]:
        mine = [row for rows_ in per_repeat for row in rows_ if row["variant"] == variant]
        row = {"variant": variant, "repeats": len(mine), "completed": sum(r["completed"] for r in mine),
               "failed": sum(r["failed"] for r in mine),
               "kv_from_connector": min(r["kv_from_connector"] for r in mine),
               "kv_tokens_from_connector": sum(r["kv_tokens_from_connector"] for r in mine),
               "outputs_match_recompute": all(r["outputs_match_recompute"] for r in mine)}
        for key in ("ttft_p50_s", "output_tok_s", "ttft_ratio", "ttft_gain", "output_gain", "ttft_vs_floor",
                    "first_ttft_vs_floor", "first_ttft_s",
                    "logprobs_max_diff_vs_recompute", "logprobs_max_diff_vs_fill"):
            values = [r[key] for r in mine if r.get(key) is not None]
            if values:
                row[key] = median(values)
                row[f"{key}_min"], row[f"{key}_max"] = min(values), max(values)
        rows.append(row)
    return rows


def run(spec: ColdRestartSpec, progress: Callable[[str], None] = lambda _: None) -> dict:
    if not Path(spec.model, "config.json").exists():
        raise FxError(f"no model at {spec.model}", "fxctl serve make-model (the tiny model)")
    repeats = []
    for number, order in enumerate(orders(spec.variants, spec.repeats), 1):
        progress(f"repeat {number}/{spec.repeats}: {', '.join(order)}")
        results = {variant: run_variant(spec, variant, progress) for variant in order}
        repeats.append({"order": list(order), "results": results,
                        "rows": compare({v: results[v] for v in spec.variants})})
    return {"label": LABEL, "spec": asdict(spec), "rows": summarize_repeats([r["rows"] for r in repeats]),
            "repeats": repeats}
