"""`fxctl tune`: parse, call fxctl.tune.session.tune, render (the summary, and progress lines on stderr)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from fxctl.loadgen.metrics import percentile
from fxctl.output import emit


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise click.BadParameter("a comma-separated list of integers, e.g. 1,2,4,8,16") from exc


class ProgressLine:
    """One line per trial on stderr (i of about N, concurrency, TTFT p50, tok/s), updated while it runs."""

    def __init__(self, stream=None):
        self.total = 0
        self.count = 0
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.last = 0.0
        self.label = ""

    def begin(self, label: str, total: int) -> None:
        self.total = total
        self.count += 1
        self.label = f"[{self.count}/~{max(self.total, self.count)}] {label}"

    def running(self, records: list, elapsed: float) -> None:
        now = time.monotonic()
        if not self.live or now - self.last < 0.2 or not records:
            return
        self.last = now
        ttfts = [r.model_ttft if r.model_ttft is not None else r.ttft for r in records if r.ok]
        tokens = sum(r.output_tokens for r in records if r.ok)
        self.stream.write(f"\r{self.label}: {len(records)} done, running TTFT p50 {percentile(ttfts, 50):.2f} s, "
                          f"~{tokens / elapsed if elapsed else 0:.1f} tok/s   ")
        self.stream.flush()

    def end(self, trial: dict) -> None:
        r = trial["result"]
        mark = "meets SLO" if trial["feasible"] else "misses SLO"
        if trial.get("invalid"):
            mark = f"invalid measurement ({trial['invalid']})"
        how = " (resumed)" if trial.get("resumed") else f" ({trial['wall_s']:.1f} s)"
        self.stream.write(f"{chr(13) if self.live else ''}{self.label}: TTFT p50 {r['median_ttft_ms'] / 1000:.2f} s, "
                          f"{r['output_throughput']:.1f} tok/s, {mark}{how}\n")
        self.stream.flush()


@click.command("tune")
@click.option("--target", type=click.Choice(["sim", "virtual", "url", "vllm"]), default="sim", show_default=True,
              help="sim: start `fxctl sim serve` per server configuration; virtual: the emulator's engine in "
                   "virtual time (no HTTP); url: a running server (load only); vllm: real vLLM + LMCache + "
                   "fxctl's tier started on this machine per server configuration (e.g. --profile cpu-tiny).")
@click.option("--python", "serve_python", default=None,
              help="--target vllm: the serving env's python (default: fxctl serve install-env's).")
@click.option("--model", "serve_model", default=None,
              help="--target vllm: model folder (default: fxctl serve make-model's).")
@click.option("--l2-dir", "serve_l2_dir", default=None,
              help="--target vllm: scratch folder for the tier (default: under the state dir).")
@click.option("--profile", default="mi308x-qwen3-coder-480b-tp8", show_default=True,
              help="Emulator profile (sim, virtual): name in profiles/ or a YAML path.")
@click.option("--url", default=None, help="With --target url: the server's base URL.")
@click.option("--workload", type=click.Choice(["cold-recovery", "long-context", "multi-turn"]),
              default="cold-recovery", show_default=True)
@click.option("--slo", default=None, help="Latency SLO, e.g. 'ttft_p50<=12s' or 'ttft_p50<=12s,tpot_p99<=200ms'.")
@click.option("--param", "params", multiple=True,
              help="Server setting to search, SECTION.KEY=V1,V2 (repeatable; outer loop), e.g. "
                   "tiers.l1_size_gb=16,64 or serving.max_num_seqs=16,256.")
@click.option("--baseline", type=click.Choice(["no-offload"]), default=None,
              help="Also measure the best point with KV offload off; report the gain as in R2.")
@click.option("--grid", "full", is_flag=True, help="Measure every grid point instead of searching.")
@click.option("--concurrency", "concurrencies", default="1,2,4,6,8,12,16,20,24,32,40,48,64", show_default=True,
              help="Concurrency grid the search moves on.")
@click.option("--start", default=4, show_default=True, type=click.IntRange(1), help="First concurrency tried.")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, 9),
              help="Measure a point up to this many times while its SLO decision is close (noisy trials); "
                   "the search uses the medians.")
@click.option("--repeat-within", default=0.10, show_default=True, type=click.FloatRange(0, 1),
              help="Close: the median SLO margin within this share of the bound, or runs on both sides of it.")
@click.option("--requests-per-client", default=4, show_default=True, type=click.IntRange(1, 100))
@click.option("--prompt-tokens", default=None, help="MIN-MAX prompt tokens (default: the profile's calibration).")
@click.option("--output-tokens", default=None, type=click.IntRange(1))
@click.option("--time-scale", default=None, type=click.FloatRange(min=0),
              help="Wall seconds per model second: the emulator's (sim; default 0.005), or what measured times "
                   "are divided by (url; default 1).")
@click.option("--clock", type=click.Choice(["model", "wall"]), default=None,
              help="Latencies from the emulator's model time (default for sim) or the client's wall clock "
                   "divided by the time scale (default for url).")
@click.option("--time-limit", default=600.0, show_default=True, type=click.FloatRange(min=1),
              help="Wall seconds per trial (requests still running are cancelled and count as failed).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where trials and outputs go (default: $FXCTL_RUN_DIR, or $XDG_STATE_HOME/fxctl/runs).")
@click.option("--resume", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Resume the run in this directory with its saved options: finished trials are not repeated.")
@click.pass_obj
def command(app, target, serve_python, serve_model, serve_l2_dir, profile, url, workload, slo, params, baseline, full,
            concurrencies, start, repeats, repeat_within, requests_per_client, prompt_tokens, output_tokens,
            time_scale, clock, time_limit, run_dir, resume):
    """Find the best operating point under a latency SLO, by measurement.

    \b
    Outer loop: server settings (--param; the server restarts only when they change). Inner loop:
    concurrency, bracket then bisect/interpolate on the SLO margin (--grid: every point). Every trial is
    a JSON file in the run directory; --resume DIR skips finished ones (Ctrl-C leaves a resumable run).
    Writes summary.json, trials.csv, tune.png and the chosen settings as a profile YAML.

    \b
    Example (emulated R2 platform, about 2 minutes):
      fxctl tune --target sim --profile mi308x-qwen3-coder-480b-tp8 --workload cold-recovery \\
        --slo 'ttft_p50<=12s' --baseline no-offload
    """
    from fxctl.errors import BadInput, ExitCode, FxError
    from fxctl.tune.report import TABLE_HEADERS, table_rows, text_summary
    from fxctl.tune.session import Interrupted, tune
    from fxctl.tune.sweep import TuneOptions

    options = None
    if resume is None:
        if not slo:
            raise BadInput("--slo is required", "e.g. --slo 'ttft_p50<=12s'")
        low = high = None
        if prompt_tokens:
            low_text, _, high_text = prompt_tokens.partition("-")
            low, high = int(low_text), int(high_text or low_text)
        if target == "vllm":
            from fxctl.cli.serve_env_cmd import serving_python
            from fxctl.paths import state_home, tiny_model_dir
            serve_python = serving_python(serve_python)
            serve_model = serve_model or str(tiny_model_dir())
            serve_l2_dir = serve_l2_dir or str(state_home() / "tune-l2")
        wall = target in ("url", "vllm")
        options = TuneOptions(slo=slo, target=target, profile=profile, url=url, workload=workload,
                              params=list(params), baseline=baseline, grid=full, concurrencies=_ints(concurrencies),
                              start=start, requests_per_client=requests_per_client,
                              time_scale=time_scale if time_scale is not None else (1.0 if wall else 0.005),
                              clock=clock or ("wall" if wall else "model"), min_tokens=low,
                              max_tokens=high, output_tokens=output_tokens, time_limit_s=time_limit,
                              python=serve_python, model=serve_model, l2_dir=serve_l2_dir, repeats=repeats,
                              repeat_within=repeat_within)
    try:
        summary = tune(options, run_dir=run_dir, resume=resume, progress=ProgressLine())
    except Interrupted as exc:
        click.echo(f"\ninterrupted: finished trials are kept; resume with --resume {exc.run_dir}", err=True)
        raise
    emit(summary, app.output_format if app else "table", rows=table_rows(summary), headers=TABLE_HEADERS,
         text=text_summary(summary))
    if summary["best"] is None:
        invalid = sum(1 for t in summary["trials"] if t.get("invalid"))
        raise FxError(f"no point met the SLO {summary['slo']} ({summary['trials_total']} trials"
                      + (f", {invalid} invalid measurements" if invalid else "") + ")",
                      f"see {summary['run_dir']}/trials.csv; relax the SLO or search other --param values",
                      exit_code=ExitCode.SLO_NOT_MET)
