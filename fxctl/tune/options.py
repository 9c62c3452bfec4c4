"""What a tuning run is asked to do: each option declared once, with its default and its command-line
spelling (fxctl.options; `fxctl tune`'s options are generated from this class). A run directory keeps these
values (summary.json, and --resume reads them back)."""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.loadgen.workloads import WORKLOADS
from fxctl.options import int_list, option
from fxctl.tune.search import DEFAULT_GRID

TARGETS = ("sim", "virtual", "url", "vllm")
WALL_CLOCK_TARGETS = ("url", "vllm")     # measured on the client's clock, not the emulator's model time
SIM_TIME_SCALE = 0.005                   # the emulator's wall seconds per model second in a tuning run


@dataclass
class TuneOptions:
    slo: str = option("--slo", "Latency SLO, e.g. 'ttft_p50<=12s' or 'ttft_p50<=12s,tpot_p99<=200ms'.")
    target: str = option(
        "--target", "sim: start `fxctl sim serve` per server configuration; virtual: the emulator's engine in "
        "virtual time (no HTTP); url: a running server (load only); vllm: real vLLM + LMCache + fxctl's tier "
        "started on this machine per server configuration (e.g. --profile cpu-tiny).", default="sim",
        choices=TARGETS)
    profile: str = option("--profile", "Emulator profile (sim, virtual): name in profiles/ or a YAML path.",
                          default="mi308x-qwen3-coder-480b-tp8")
    url: str | None = option("--url", "With --target url: the server's base URL.", default=None)
    workload: str = option("--workload", "The load's shape.", default="cold-recovery", choices=WORKLOADS)
    params: list[str] = option(
        "--param", "Server setting to search, SECTION.KEY=V1,V2 (repeatable; outer loop), e.g. "
        "tiers.l1_size_gb=16,64 or serving.max_num_seqs=16,256.", default_factory=list, multiple=True)
    baseline: str | None = option("--baseline", "Also measure the best point with KV offload off; report the "
                                  "gain as in R2.", default=None, choices=("no-offload",))
    grid: bool = option("--grid", "Measure every grid point instead of searching.", default=False, is_flag=True)
    concurrencies: list[int] = option("--concurrency", "Concurrency grid the search moves on.",
                                      default_factory=lambda: list(DEFAULT_GRID), parse=int_list,
                                      show=",".join(map(str, DEFAULT_GRID)))
    start: int = option("--start", "First concurrency tried.", default=4, min=1)
    requests_per_client: int = option("--requests-per-client", "Requests each client sends per trial.",
                                      default=4, min=1, max=100)
    time_scale: float | None = option(
        "--time-scale", "Wall seconds per model second: the emulator's (sim), or what measured times are "
        "divided by (url, vllm).", default=None, min=0, show=f"{SIM_TIME_SCALE} for sim, 1 for url and vllm")
    clock: str | None = option(
        "--clock", "Latencies from the emulator's model time or the client's wall clock divided by the time "
        "scale.", default=None, choices=("model", "wall"), show="model for sim, wall for url and vllm")
    min_tokens: int | None = None        # --prompt-tokens MIN-MAX (default: the profile's calibration)
    max_tokens: int | None = None
    output_tokens: int | None = option("--output-tokens", "Output tokens per request (default: the profile's "
                                       "calibration).", default=None, min=1)
    shared_prefix: float = 0.0
    time_limit_s: float = option("--time-limit", "Wall seconds per trial (requests still running are cancelled "
                                 "and count as failed).", default=600.0, min=1)
    # target vllm: the real engine on this machine (fxctl serve --local)
    python: str | None = option("--python", "--target vllm: the serving env's python (default: fxctl serve "
                                "install-env's).", default=None)
    model: str | None = option("--model", "--target vllm: model folder (default: fxctl serve make-model's).",
                               default=None)
    l2_dir: str | None = option("--l2-dir", "--target vllm: scratch folder for the tier (default: under the "
                                "state dir).", default=None)
    # noise: measure a point up to `repeats` times while its decision is close (|margin| < repeat_within
    # or runs on both sides of the SLO); the search sees medians (trials of repeats: kind search-r2, ...)
    repeats: int = option("--repeats", "Measure a point up to this many times while its SLO decision is close "
                          "(noisy trials); the search uses the medians.", default=1, min=1, max=9)
    repeat_within: float = option("--repeat-within", "Close: the median SLO margin within this share of the "
                                  "bound, or runs on both sides of it.", default=0.10, min=0, max=1)

    def __post_init__(self):
        wall = self.target in WALL_CLOCK_TARGETS
        if self.time_scale is None:
            self.time_scale = 1.0 if wall else SIM_TIME_SCALE
        if self.clock is None:
            self.clock = "wall" if wall else "model"
