"""`fxctl bench`: benchmarks. `tier` measures the KV tier; other subcommands join this group."""

from __future__ import annotations

from pathlib import Path

import click

from fxctl.kvtier.config import IO_THREADS
from fxctl.output import dumps, emit


@click.group(name="bench")
def command():
    """Benchmarks: the KV tier (tier) and the serving load generator (serve)."""


@command.command(name="tier")
@click.option("--dir", "directory", default=None,
              help="Directory on the filesystem under test: point it at the array's mount. The bench works in a "
                   "new fxctl-bench-* directory inside it, deleted afterwards unless --keep; nothing else there is "
                   "touched. Default: $XDG_CACHE_HOME/fxctl/bench/tier (~/.cache).")
@click.option("--size", "sizes", multiple=True, type=click.Choice(["32m", "4m"]), default=("32m", "4m"),
              show_default=True, help="Chunk shapes: 32m = Llama-3.1-8B bf16 TP1, 4m = Qwen3-Coder-480B FP8 TP8.")
@click.option("--total", default="2G", show_default=True, help="Bytes of KV per chunk size and backend.")
@click.option("--l1", "l1", default="1G", show_default=True,
              help="L1 DRAM budget of the L1-hit measure (up to 16 chunks that fit in it, at least 2).")
@click.option("--batch", default="512M", show_default=True,
              help="Bytes per restore call (fxctl's harness) and per round (`lmcache bench l2`).")
@click.option("--io-threads", default=str(IO_THREADS), show_default=True,
              help="I/O thread counts swept for every backend (fxctl io_threads, LMCache disk_io_threads / "
                   "num_workers), e.g. 2,4,16: each backend is compared at its best.")
@click.option("--passes", default=3, show_default=True, type=click.IntRange(1), help="Cold restore passes per process.")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1),
              help="Fresh processes per backend and size (order alternated).")
@click.option("--in-flight", "in_flight", multiple=True, type=click.IntRange(1), default=(4,), show_default=True,
              help="`lmcache bench l2 --in-flight` depths (repeatable).")
@click.option("--fio-jobs", default="1,4", show_default=True, help="fio numjobs swept for the ceiling.")
@click.option("--fio-depths", default="1,4,16", show_default=True, help="fio iodepths swept for the ceiling.")
@click.option("--recovery-chunks", default=100_000, show_default=True, type=click.IntRange(1),
              help="Chunks in the index-recovery measure (journal, then checkpoint).")
@click.option("--no-lmcache", is_flag=True, help="Skip LMCache's LocalDiskBackend (fxctl's harness).")
@click.option("--no-l2-bench", is_flag=True, help="Skip LMCache's own harness (`lmcache bench l2`).")
@click.option("--keep", is_flag=True, help="Keep the scratch directory (its path is in the result).")
@click.pass_obj
def tier(app, directory, sizes, total, l1, batch, io_threads, passes, repeats, in_flight, fio_jobs, fio_depths,
         recovery_chunks, no_lmcache, no_l2_bench, keep):
    """Cold restore and store of fxctl's tier against LMCache's adapters and the fio ceiling, fairly timed.

    Two harnesses on the --dir's filesystem: fxctl's (fxctl and LMCache's LocalDiskBackend, each in a
    fresh process, same timer, every chunk verified outside it) and LMCache's own `lmcache bench l2`
    (fs_native O_DIRECT, raw_block posix / io_uring, fxctl as a plugin adapter). Prints same-run ratios
    (`-o json`: the full result). In both harnesses fxctl also runs with its read checksums off, as LMCache
    reads, to show what they cost. Needs root (page cache drops, huge pages for fio).
    """
    from fxctl.output import table
    from fxctl.paths import bench_scratch_dir
    from fxctl.tierbench.bench import TierBenchSpec, backend_rows, run
    from fxctl.units import size_bytes

    def ints(text: str, flag: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            values = ()
        if not values or min(values) < 1:
            raise click.BadParameter(f"a comma-separated list of integers >= 1, not {text!r}", param_hint=flag)
        return values

    spec = TierBenchSpec(directory=directory or str(bench_scratch_dir()), sizes=tuple(sizes),
                         total_bytes=size_bytes(total, "--total"), l1_bytes=size_bytes(l1, "--l1"),
                         batch_bytes=size_bytes(batch, "--batch"), io_threads=ints(io_threads, "--io-threads"),
                         passes=passes, repeats=repeats, in_flight=tuple(in_flight),
                         fio_jobs=ints(fio_jobs, "--fio-jobs"), fio_depths=ints(fio_depths, "--fio-depths"),
                         recovery_chunks=recovery_chunks, lmcache=not no_lmcache, l2_harness=not no_l2_bench, keep=keep)
    result = run(spec)
    rows = [(r["measure"], "-" if r["value"] is None else f"{r['value']:.3g}",
             "-" if r["goal"] is None else f">= {r['goal']:g}",
             {True: "yes", False: "NO", None: "-"}[r["met"]], r["detail"]) for r in result["ratios"]]
    headers, backends = backend_rows(result) if result.get("sizes") else ([], [])
    text = table(rows, ["measure", "ratio", "goal", "met", "detail"])
    emit(result, app.output_format if app else "table", rows=backends if headers else None,
         headers=headers or None, text=f"\nmedium: {result.get('medium', '?')}\n{text}")


@command.command(name="serve")
@click.option("--url", required=True, help="Base URL of an OpenAI-compatible server (vLLM, fxctl sim serve).")
@click.option("--workload", type=click.Choice(["long-context", "multi-turn", "cold-recovery"]),
              default="long-context", show_default=True)
@click.option("--concurrency", type=click.IntRange(1), default=None,
              help="Closed loop: clients sending back to back (default 8); with --rate: the cap.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Open loop: Poisson arrivals per second (model seconds under --time-scale).")
@click.option("--requests", "num_prompts", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="Measured requests (multi-turn: sessions).")
@click.option("--warmup", type=click.IntRange(0, 10_000), default=0, show_default=True,
              help="Requests sent first and left out of the results.")
@click.option("--prompt-tokens", default="1024", show_default=True, help="Prompt length, N or MIN-MAX tokens "
              "(multi-turn: each user message).")
@click.option("--shared-prefix", type=click.FloatRange(0, 0.99), default=0.0, show_default=True,
              help="Share of each prompt that is a prefix common to all prompts.")
@click.option("--output-tokens", type=click.IntRange(1), default=64, show_default=True)
@click.option("--turns", type=click.IntRange(1, 100), default=4, show_default=True,
              help="multi-turn: turns per session.")
@click.option("--think-time", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="multi-turn: seconds between a reply and the next turn.")
@click.option("--slo", default=None, help="Per-request SLO for goodput, e.g. 'ttft_p50<=2s,tpot_p50<=50ms'.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Wall seconds for the whole run; requests still running are cancelled (failed).")
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Divide measured times by this (the emulator's --time-scale), giving model seconds.")
@click.option("--clock", type=click.Choice(["wall", "model"]), default="wall", show_default=True,
              help="model: latencies and duration from the emulator's own model time (fxctl sim only).")
@click.option("--model", default=None, help="Model name to send (default: the server's first model).")
@click.option("--reset-caches", is_flag=True, help="First POST /reset_prefix_cache and /reset_tiers (L1, L2).")
@click.option("--tier-metrics", "tier_metrics", multiple=True,
              help="Also scrape fxctl's tier here for per-tier hit rates, e.g. http://127.0.0.1:8502/metrics "
                   "(LMCache MP mode: the server's metrics port, fxctl serve status names it); repeatable.")
@click.option("--replica", "replicas", multiple=True,
              help="With --url a router (fxctl serve's): each replica's base URL, e.g. http://10.0.0.12:8000 "
                   "(repeatable). The reset endpoints (cold-recovery's eviction, --reset-caches) and /metrics go to "
                   "every replica, their counters summed; a router would pass them to one.")
@click.option("--vocab", type=click.IntRange(256, 10_000_000), default=None,
              help="The model's vocabulary size: prompt token ids stay below it (e.g. 4096 for the tiny model; "
                   "default: ids of a 152k-token vocabulary).")
@click.option("--dataset", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Send these prompts (JSONL, one {\"prompt\": \"text\"} a line: the file vLLM bench's custom "
                   "dataset and GuideLLM's json_file read) instead of generated token ids; --warmup takes the first "
                   "lines, --requests the next. long-context only.")
@click.option("--result-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the result JSON here.")
@click.option("--max-failed-fraction", type=click.FloatRange(0, 1), default=None,
              help="Exit 1 when more than this share of the requests failed (0: any failure). "
                   "Default: only when every request failed.")
@click.pass_obj
def serve(app, url, workload, concurrency, rate, num_prompts, warmup, prompt_tokens, shared_prefix, output_tokens,
          turns, think_time, slo, time_limit, time_scale, clock, model, reset_caches, tier_metrics, replicas, vocab,
          dataset, result_file, max_failed_fraction):
    """Serving load generator: streaming requests, closed or open loop; vLLM bench's result fields.

    \b
    Reports TTFT, TPOT, ITL (per token), E2EL (mean, median, p90, p99), output and total tok/s, req/s,
    goodput under --slo, errors, and per-tier hit rates from /metrics deltas (fxctl sim, fxctl's tier).
    Every prompt starts with its own salt: no accidental shared prefixes. Exit 1 (after the result is
    printed and written) when every request failed, or more than --max-failed-fraction of them.
    """
    from fxctl.errors import BadInput, FxError
    from fxctl.loadgen.generator import LoadSpec
    from fxctl.loadgen.generator import run as run_load
    from fxctl.loadgen.metrics import failed_too_many, parse_slo
    from fxctl.loadgen.workloads import WorkloadSpec, read_dataset

    try:
        low, _, high = prompt_tokens.partition("-")
        spec = WorkloadSpec(workload, int(low), int(high or low), shared_prefix, output_tokens, turns, think_time,
                            vocab=vocab, dataset=dataset)
        limits = parse_slo(slo) if slo else None
        if dataset and len(read_dataset(dataset)) < warmup + num_prompts:
            raise ValueError(f"{dataset}: --warmup {warmup} + --requests {num_prompts} prompts needed, "
                             f"the file has {len(read_dataset(dataset))}")
    except ValueError as exc:
        raise BadInput(str(exc), "see fxctl bench serve --help") from exc
    result = run_load(LoadSpec(url, spec, concurrency=concurrency if rate else (concurrency or 8), rate=rate,
                               requests=num_prompts, warmup=warmup, time_limit_s=time_limit, time_scale=time_scale,
                               model=model, slo=limits, clock=clock, reset_caches=reset_caches,
                               tier_metrics=tuple(tier_metrics), replicas=tuple(replicas)))
    if result_file:
        result_file.write_text(dumps(result, "json"))
    emit(result, app.output_format if app else "table", rows=serve_rows(result),
         headers=["metric", "mean", "median", "p90", "p99"], text=serve_text(result))
    failure = failed_too_many(result, max_failed_fraction)
    if failure:
        raise FxError(f"bench serve: {failure}", f"check that {url} serves (curl {url.rstrip('/')}/v1/models)"
                      if not result["completed"] else "see the errors above; --max-failed-fraction sets the share")


def serve_rows(result: dict) -> list[tuple]:
    return [(name.upper() + " ms", *(f"{result[f'{stat}_{name}_ms']:.2f}" for stat in ("mean", "median", "p90", "p99")))
            for name in ("ttft", "tpot", "itl", "e2el")]


def serve_text(result: dict) -> str:
    lines = [f"\ncompleted {result['completed']}, failed {result['failed']} in {result['duration']:.2f} s "
             f"({result['clock']} clock): {result['request_throughput']:.2f} req/s, "
             f"{result['output_throughput']:.1f} output tok/s, {result['total_token_throughput']:.1f} total tok/s"]
    if "request_goodput" in result:
        lines.append(f"goodput {result['request_goodput']:.2f} req/s under {', '.join(result['slo'])}")
    for tier, hits in (result.get("tier_hits") or {}).items():
        if hits.get("hit_rate") is not None:
            lines.append(f"{tier} hit rate {100 * hits['hit_rate']:.1f} %")
    lines += [f"error x{n}: {e}" for e, n in result["errors"].items()] + result["notes"]
    if result["timed_out"]:
        lines.append("time limit reached: requests still running were cancelled")
    return "\n".join(lines)


def _register_cold_restart() -> None:
    from fxctl.cli.bench_cold_cmd import cold_restart_command

    command.add_command(cold_restart_command)


_register_cold_restart()
