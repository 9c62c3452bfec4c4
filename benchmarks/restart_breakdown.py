"""Where the time goes after a restart (issue 28 #5): each request's TTFT after a full restart of vLLM and
LMCache's MP server, taken apart by vLLM's and the tier's own histograms, for fxctl's tier, LMCache's `fs`
adapter (the fastest anchor of the cold-restart table) and the floor (the same deployment not restarted: the
prompts from vLLM's own prefix cache).

Each variant is deployed as `fxctl bench cold-restart` deploys it (fxctl.loadgen.cold_restart: the same
settings, prompts, nonce and load generator), fills, restarts (the floor does not), and sends the prompts again
one at a time. Around that measured phase the benchmark reads, from vLLM's /metrics, the sums of its request
histograms (time to first token as vLLM sees it, time queued, prefill time) and, from fxctl's tier endpoint, its
chunk reads from L2 (count, bytes, seconds). Printed per variant: the client's TTFT (first request, median),
vLLM's TTFT, queue and prefill (per request), what the client saw beyond vLLM's TTFT (HTTP, tokenizing,
detokenizing), and for fxctl the L2 read time per request. Variants run in a rotated order per repeat.

    flock /tmp/fxctl-heavy.lock python -m benchmarks.restart_breakdown [--repeats 2] [--variants fxctl,fs,floor]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import urllib.request
from dataclasses import replace

from tabulate import tabulate

from fxctl.loadgen import cold_restart
from fxctl.loadgen.generator import LoadSpec
from fxctl.loadgen.generator import run as run_load
from fxctl.loadgen.workloads import WorkloadSpec, completion_head
from fxctl.serve import deploy
from fxctl.serve.render import plan_instances
from fxctl.serve.replica_metrics import parse_counters, sum_by_name
from fxctl.serve.roles import Role

PORT = 8261
# vLLM's request histograms (seconds): summed over the measured phase, divided by its requests
VLLM = {"vllm_ttft": "vllm:time_to_first_token_seconds", "queue": "vllm:request_queue_time_seconds",
        "prefill": "vllm:request_prefill_time_seconds"}
TIER = {"l2_reads": "fxctl_tier_read_latency_seconds_count{tier=\"l2\"}",
        "l2_read_s": "fxctl_tier_read_latency_seconds_sum{tier=\"l2\"}",
        "l2_bytes": "fxctl_tier_read_bytes_total{tier=\"l2\"}"}


def page(url: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return parse_counters(answer.read().decode())
    except OSError:
        return {}


def snapshot(engine: str, tier: str | None) -> dict[str, float]:
    counters = page(f"{engine}/metrics")
    values = {key: sum_by_name(counters, name + "_sum") for key, name in VLLM.items()}
    values["requests"] = sum_by_name(counters, VLLM["vllm_ttft"] + "_count")
    if tier:
        found = page(tier)
        values.update({key: found.get(name, 0.0) for key, name in TIER.items()})
    return values


def warm_up(engine: str, tokens: int, vocab: int, extra: dict | None = None) -> float:
    """One completion of `tokens` prompt tokens and one output token, seconds. A few tokens: no whole chunk
    for LMCache to store or find; a long one (other tokens than the measured prompts'): the engine's whole
    prefill path, a miss in the tier and a store."""
    prompt: str | list[int] = "warm up"
    extra = extra or {}
    if tokens > 8:
        draw = random.Random(20261207)
        prompt = [draw.randrange(100, vocab) for _ in range(tokens)]
    body = json.dumps({"model": models(engine)[0], "prompt": prompt, "max_tokens": 1, **extra}).encode()
    started = time.perf_counter()
    request = urllib.request.Request(f"{engine}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        answer.read()
    return time.perf_counter() - started


def models(engine: str) -> list[str]:
    with urllib.request.urlopen(f"{engine}/v1/models", timeout=30) as answer:
        return [m["id"] for m in json.loads(answer.read())["data"]]


def measure(spec: cold_restart.ColdRestartSpec, variant: str) -> dict:
    """`variant`: fxctl, fs or floor as the cold-restart bench deploys them; a `-warm` suffix sends one short
    request after the restart, before the measured prompts (what a warm-up at start-up would do), `-warmlong`
    one of the prompts' length with other tokens, `-warmlike` a short one asking what the measured requests
    ask (their output tokens, logprobs)."""
    base, _, warm = variant.partition("-")
    settings = cold_restart.deployment_settings(spec, base)
    settings = replace(settings, name=f"bd-{variant}")
    for folder in (f"{settings.l2_dir}/{settings.name}-0", f"{settings.l2_dir}/{settings.name}-mp"):
        shutil.rmtree(folder, ignore_errors=True)
    started = deploy.start(settings, deploy.Where(), ready_timeout=spec.ready_timeout_s)["local"]
    if not started.ok:
        raise SystemExit(f"{variant}: start failed: {started.error}")
    plans = plan_instances(settings, "local")
    server = next((p for p in plans if p.is_server and p.metrics_port), None)
    tier = f"http://127.0.0.1:{server.metrics_port}/metrics" if server and base != "fs" else None
    engine = f"http://127.0.0.1:{next(p for p in plans if p.role == Role.ENGINE).port}"
    before: dict[str, float] = {}
    restart = cold_restart.restart(settings, spec.ready_timeout_s)
    workload = WorkloadSpec("cold-recovery", spec.prompt_tokens, spec.prompt_tokens, 0.0, spec.output_tokens,
                            vocab=cold_restart.model_vocab(spec.model), logprobs=True)

    def evict() -> dict:
        done = cold_restart.keep_everything() if base == "floor" else restart()
        if warm:
            long = spec.prompt_tokens if warm == "warmlong" else 2
            like = completion_head(workload, None) if warm == "warmlike" else None   # stream, logprobs, ...
            done["warm_up_s"] = warm_up(engine, long, workload.vocab or 1000, like)
        before.update(snapshot(engine, tier))   # after the restart: the counters of the new processes
        return done

    try:
        result = run_load(LoadSpec(engine, workload, concurrency=1, requests=spec.prompts,
                                   nonce=cold_restart.NONCE, time_limit_s=1800.0, evict=evict))
        after = snapshot(engine, tier)
    finally:
        deploy.stop(deploy.Where(), settings.state_dir, settings.name)
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    n = delta["requests"] or 1
    ttfts = [v for _, v in sorted((result.get("ttfts") or {}).items())]   # seconds
    client = statistics.median(ttfts) if ttfts else None
    row = {"variant": variant, "requests": int(delta["requests"]), "first_s": ttfts[0] if ttfts else None,
           "rest_s": statistics.median(ttfts[1:]) if len(ttfts) > 1 else None,
           "client_ttft_s": client, "vllm_ttft_s": delta["vllm_ttft"] / n, "queue_s": delta["queue"] / n,
           "prefill_s": delta["prefill"] / n}
    row["outside_vllm_s"] = (sum(ttfts) / len(ttfts) - row["vllm_ttft_s"]) if ttfts else None
    if tier and base != "floor":
        row.update(l2_reads=int(delta.get("l2_reads", 0)), l2_read_s=delta.get("l2_read_s", 0.0) / n,
                   l2_mb=delta.get("l2_bytes", 0.0) / 1e6 / n)
    return row


def main() -> None:
    from fxctl.cli.serve_env_cmd import serving_python
    from fxctl.paths import tiny_model_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="fxctl,fxctl-warm,fs,floor")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--json")
    args = parser.parse_args()
    variants = tuple(args.variants.split(","))
    scratch = tempfile.mkdtemp(prefix="fxctl-breakdown-")
    spec = cold_restart.ColdRestartSpec(python=serving_python(None), model=str(tiny_model_dir()), l2_dir=scratch,
                                        prompts=args.prompts, port=PORT)
    rows = []
    try:
        for number, order in enumerate(cold_restart.orders(variants, args.repeats), 1):
            for variant in order:
                started = time.monotonic()
                rows.append({"repeat": number, **measure(spec, variant)})
                print(f"repeat {number} {variant}: {time.monotonic() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = ("first_s", "rest_s", "client_ttft_s", "vllm_ttft_s", "queue_s", "prefill_s", "outside_vllm_s", "l2_read_s",
            "l2_mb")
    table = []
    for variant in variants:
        mine = [r for r in rows if r["variant"] == variant]
        line = [variant]
        for key in keys:
            values = [r[key] for r in mine if r.get(key) is not None]
            line.append(f"{statistics.median(values) * (1 if key == 'l2_mb' else 1000):.1f}" if values else "-")
        table.append(line)
    print(tabulate(table, headers=["variant", "first request ms", "the others' p50 ms", "TTFT p50 ms (client)",
                                   "vLLM TTFT ms", "queued ms", "prefill ms", "outside vLLM ms", "L2 reads ms",
                                   "L2 MB"],
                   tablefmt="github"))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": rows, "spec": spec.__dict__}, out, indent=2)


if __name__ == "__main__":
    main()
