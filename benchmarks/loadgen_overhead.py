"""Load generator overhead against the emulator: the request rate it sustains on one core at zero delay,
its CPU time per request, and the TTFT error it adds over known delays (fixed-delays: TTFT 100 ms).

The emulator runs on the other core (taskset when available); the load generator is pinned to core 0.
With --guidellm PATH (a GuideLLM executable), the same zero-delay server is measured with GuideLLM too.

    python -m benchmarks.loadgen_overhead [--requests 400] [--concurrency 1,8,32] [--guidellm /venv/bin/guidellm]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tabulate import tabulate

from fxctl.loadgen.generator import LoadSpec, run
from fxctl.loadgen.workloads import WorkloadSpec
from fxctl.sim.profile import resolve_profile_path
from fxctl.tune.server import ServerProcess, sim_argv


def zero_delay_profile(folder: Path) -> Path:
    raw = yaml.safe_load(resolve_profile_path("fixed-delays").read_text())
    raw["name"], raw["fixed_delays"] = "zero-delays", {"ttft_ms": 0, "tpot_ms": 0}
    path = folder / "zero-delays.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def pinned(argv: list[str], core: int) -> list[str]:
    return (["taskset", "-c", str(core)] + argv) if shutil.which("taskset") and os.cpu_count() > 1 else argv


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(url: str, concurrency: int, requests: int, output_tokens: int) -> dict:
    spec = LoadSpec(url, WorkloadSpec("long-context", 128, 128, output_tokens=output_tokens),
                    concurrency=concurrency, requests=requests, warmup=min(concurrency, 8), time_limit_s=300)
    cpu = cpu_seconds()
    result = run(spec)
    result["client_cpu_ms_per_request"] = 1000 * (cpu_seconds() - cpu) / max(result["completed"], 1)
    return result


def guidellm_rate(exe: str, url: str, requests: int, folder: Path) -> str:
    out = folder / "guidellm.json"
    cmd = [exe, "benchmark", "--target", url, "--rate-type", "throughput", "--max-requests", str(requests),
           "--data", "prompt_tokens=128,output_tokens=8", "--output-path", str(out)]
    started = time.perf_counter()
    proc = subprocess.run(pinned(cmd, 0), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return f"failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    return f"{requests / (time.perf_counter() - started):.0f} req/s incl. start-up (see {out})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--output-tokens", type=int, default=8)
    parser.add_argument("--guidellm", default=None)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and os.cpu_count() > 1:
        os.sched_setaffinity(0, {0})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with ServerProcess(pinned(sim_argv(str(zero_delay_profile(folder)), 1.0), 1)) as server:
            for c in (int(x) for x in args.concurrency.split(",")):
                r = measure(server.url, c, args.requests, args.output_tokens)
                rows.append(("zero delay", c, r["completed"], f"{r['request_throughput']:.0f}",
                             f"{r['output_throughput']:.0f}", f"{r['median_ttft_ms']:.2f}",
                             f"{r['client_cpu_ms_per_request']:.2f}",
                             f"{1000 / r['client_cpu_ms_per_request']:.0f}"))
            gl = guidellm_rate(args.guidellm, server.url, args.requests, folder) if args.guidellm else None
        with ServerProcess(pinned(sim_argv("fixed-delays", 1.0), 1)) as server:
            for c in (1, 8):
                r = measure(server.url, c, 40, args.output_tokens)
                rows.append(("fixed 100/10 ms", c, r["completed"], f"{r['request_throughput']:.1f}",
                             f"{r['output_throughput']:.0f}", f"{r['median_ttft_ms']:.2f} "
                             f"(model {r['model_median_ttft_ms']:.0f}: "
                             f"+{r['median_ttft_ms'] - r['model_median_ttft_ms']:.2f})",
                             f"{r['client_cpu_ms_per_request']:.2f}", "-"))
    print(tabulate(rows, headers=["server", "c", "done", "req/s", "out tok/s", "TTFT p50 ms", "client CPU ms/req",
                                  "req/s one core could drive"]))
    print("the load generator on core 0, the emulator on core 1; the req/s column is bounded by the emulator "
          "(one Python process) as well; the last column is 1 / the client's own CPU time per request")
    if args.guidellm:
        print(f"GuideLLM (throughput mode, {args.requests} requests, same zero-delay server): {gl}")


if __name__ == "__main__":
    sys.exit(main())
