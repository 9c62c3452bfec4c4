"""`fxctl tune`: parse, call fxctl.tune.session.tune, render (the summary, and progress lines on stderr)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from fxctl.cli.option_model import click_options, given
from fxctl.loadgen.metrics import percentile
from fxctl.output import emit
from fxctl.tune.options import TuneOptions


def token_range(text: str) -> tuple[int, int]:
    """--prompt-tokens MIN-MAX (or N): the prompt lengths' range."""
    low, _, high = text.partition("-")
    if not low.strip().isdigit() or not (high or low).strip().isdigit() or int(high or low) < int(low):
        raise click.BadParameter(f"{text!r}: MIN-MAX whole numbers with MIN <= MAX, e.g. 3000-4000",
                                 param_hint="--prompt-tokens")
    return int(low), int(high or low)


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
@click_options(TuneOptions)
@click.option("--prompt-tokens", default=None, help="MIN-MAX prompt tokens (default: the profile's calibration).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where trials and outputs go (default: $FXCTL_RUN_DIR, or $XDG_STATE_HOME/fxctl/runs).")
@click.option("--resume", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Resume the run in this directory with its saved options: finished trials are not repeated.")
@click.pass_obj
def command(app, prompt_tokens, run_dir, resume, **values):
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

    options = None
    if resume is None:
        chosen = given(TuneOptions, values)
        if not chosen.get("slo"):
            raise BadInput("--slo is required", "e.g. --slo 'ttft_p50<=12s'")
        if prompt_tokens:
            chosen["min_tokens"], chosen["max_tokens"] = token_range(prompt_tokens)
        if chosen.get("target") == "vllm":
            from fxctl.cli.serve_env_cmd import serving_python
            from fxctl.paths import state_home, tiny_model_dir
            chosen["python"] = serving_python(chosen.get("python"))
            chosen["model"] = chosen.get("model") or str(tiny_model_dir())
            chosen["l2_dir"] = chosen.get("l2_dir") or str(state_home() / "tune-l2")
        options = TuneOptions(**chosen)
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
