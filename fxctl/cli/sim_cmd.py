"""`fxctl sim`: the serving emulator (simulated GPU timing) — serve, calibrate, show a profile."""

from __future__ import annotations

from pathlib import Path

import click

from fxctl.cli.context import App
from fxctl.errors import ExitCode, FxError
from fxctl.output import emit

EMULATOR = "EMULATOR: GPU timing is simulated by a cost model; every figure it reports is model time."


@click.group("sim", help=f"""Serving emulator with a calibrated GPU cost model (no GPU needed).

An OpenAI-compatible server that behaves like vLLM + LMCache at the HTTP level (continuous batching,
HBM prefix cache, L1/L2 KV tiers) and models GPU time from a profile in profiles/. {EMULATOR}""")
def command():
    pass


@command.command("serve", help=f"""Serve the OpenAI API from the emulator, like `vllm serve`.

\b
Endpoints: /v1/completions, /v1/chat/completions (streaming SSE with usage), /v1/models, /health,
/metrics (Prometheus), POST /reset_prefix_cache (HBM only, as vLLM), POST /reset_tiers (L1/L2).
{EMULATOR}""")
@click.option("--profile", "profile_name", required=True, help="Profile name in profiles/ or a YAML path.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free).")
@click.option("--time-scale", default=1.0, show_default=True, type=click.FloatRange(min=0),
              help="Wall seconds per model second (0.01: a 150 s TTFT takes 1.5 s; 0: as fast as possible).")
@click.option("--offload/--no-offload", default=None,
              help="KV offload to L1/L2 on, or off (recompute every prefix); default: the profile's.")
@click.option("--served-model-name", default=None, help="Model name clients must send (default: the profile's).")
@click.option("--real-tier", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Put L2 through the real fxctl.kvtier store in DIR (storage time measured).")
@click.option("--real-tier-scale", default=32, show_default=True, type=click.FloatRange(min=1),
              help="With --real-tier: store chunks this many times smaller; measured time is scaled back up.")
def serve(profile_name, host, port, time_scale, offload, served_model_name, real_tier, real_tier_scale):
    from fxctl.sim.profile import load_profile
    from fxctl.sim.server import ServeOptions, run_server

    profile = load_profile(profile_name)
    run_server(profile, ServeOptions(host, port, time_scale, offload, served_model_name, real_tier,
                                     real_tier_scale))


@command.command("calibrate", help=f"""Run the profile's calibration workload and compare with the published figures.

Runs the engine in virtual time (seconds, not hours) and prints emulator vs published (report R2 in
seed-facts), the ratio and whether each is within 15 %. Exit 1 if any is not. {EMULATOR}""")
@click.option("--profile", "profile_name", default="mi308x-qwen3-coder-480b-tp8", show_default=True,
              help="Profile name in profiles/ or a YAML path.")
@click.option("--requests-per-client", type=click.IntRange(1, 50), default=None,
              help="Requests each closed-loop client sends per run (default: the profile's).")
@click.pass_obj
def calibrate_command(app: App, profile_name, requests_per_client):
    from fxctl.sim.calibrate import calibrate
    from fxctl.sim.profile import load_profile

    profile = load_profile(profile_name)
    if not profile.calibration.get("report"):
        from fxctl.errors import BadInput
        raise BadInput(f"profile {profile.name} has no published figures to calibrate against",
                       "calibrate mi308x-qwen3-coder-480b-tp8 (report R2)")
    report = calibrate(profile, requests_per_client)
    rows = [(f.name, f"{f.published:g} {f.unit}", f"{f.emulated:.2f} {f.unit}", f"{f.ratio:.3f}",
             "yes" if f.within else "NO") for f in report.figures]
    fitted = "\n".join(f"  {p['parameter']} = {p['value']}  ({p['source']})" for p in report.fitted)
    text = (f"\n{report.interpretation}.\n"
            f"Fitted to R2 ({len(report.fitted)} numbers, against {len(report.figures)} figures):\n{fitted}\n"
            f"Not fitted: " + ", ".join(f"{n} from {kind}" for kind, n in report.sourced.items())
            + " (every one with its source in the profile).\n"
            + "\n".join(report.notes)
            + f"\n{EMULATOR} {report.model_seconds:.0f} model seconds ran in {report.wall_seconds:.1f} s.")
    emit(report.to_dict(), app.output_format, rows=rows,
         headers=["figure (R2)", "published", "emulator", "ratio", "within 15 %"], text=text)
    if not report.all_within:
        raise FxError("some emulated figures are more than 15 % from the published ones",
                      "see the table; refit the parameters marked 'fitted to R2' in the profile",
                      exit_code=ExitCode.HOST_FAILED)


@command.command("profile", help=f"""Show a profile: every parameter with its source, and what follows from them.

{EMULATOR}""")
@click.argument("profile_name")
@click.pass_obj
def profile_command(app: App, profile_name):
    from fxctl.sim.describe import describe_profile
    from fxctl.sim.profile import load_profile

    profile = load_profile(profile_name)
    described = describe_profile(profile)
    rows = [(p["parameter"], p["value"], p["source"]) for p in described["parameters"]]
    derived = "\n".join(f"  {k}: {v}" for k, v in described["derived"].items())
    emit(described, app.output_format, rows=rows, headers=["parameter", "value", "source"],
         text=f"\nderived:\n{derived}")
