"""`fxctl plan`: capacity planning for tiered KV serving: what fits in HBM, L1/L2 sizes, the L2 bandwidth
and SSDs a TTFT SLO needs, and the operating point predicted by the emulator (virtual time)."""

from __future__ import annotations

from pathlib import Path

import click

from fxctl.cli.context import App
from fxctl.errors import BadInput, ExitCode, FxError
from fxctl.output import emit

EMULATOR = "Predictions are SIMULATED GPU timing (fxctl sim's calibrated cost model), not measurements."


def tokens(value: str | int | None, what: str) -> int | None:
    """128k, 131072, 1M (k = 1024 tokens, as context lengths are written)."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip().lower()
    scale = {"k": 1024, "m": 1 << 20}.get(text[-1:], 1)
    try:
        number = float(text[:-1] if scale > 1 else text)
    except ValueError:
        raise BadInput(f"{what}: cannot read {value!r}", "write it like 131072, 128k or 1m (k = 1024)") from None
    if number <= 0 or number != number:
        raise BadInput(f"{what} must be positive", "e.g. 128k")
    return int(number * scale)


@click.command("plan", help=f"""Capacity planning: what fits in HBM, the tiers, the L2 bandwidth an SLO needs.

From a profile (platform + model) or a model's config.json (read locally: GQA, MHA, MLA, MoE) and the
hardware: KV bytes per token (per GPU under TP; MLA whole on every rank), the KV tokens that fit in HBM,
the largest max_model_len and concurrency, why a setting runs out while memory looks free, L1 and L2 sizes
for the reuse window, the L2 read rate a cold recovery needs for the TTFT SLO and the SSDs and links that
give it, and the predicted TTFT and throughput at the operating point. {EMULATOR}

\b
Examples:
  fxctl plan --profile mi308x-qwen3-coder-480b-tp8 --context 128k --concurrency 16 --slo 'ttft_p50<=12s'
  fxctl plan --model-config ./Llama-3.1-70B/config.json --gpu h200 --gpus 8 --tp 8 --kv-dtype fp8 \\
      --context 32k --concurrency 64 --ssds 8 --slo 'ttft_p50<=5s'
  fxctl plan --profile h200-70b --context 64k --concurrency 8 --sweep ssds=1..8 --plot ssds.png

Exit codes: 0 the plan meets the SLO (or none was given), 6 it does not and no hardware up to the
search's limits does, 2 bad input.""")
@click.option("--profile", "profile_name", default=None,
              help="Profile in profiles/ or a YAML path (the platform, efficiencies and tiers; default with "
                   "--model-config: mi308x-qwen3-coder-480b-tp8, the one calibrated to R2).")
@click.option("--model-config", type=click.Path(path_type=Path), default=None,
              help="A model's config.json (or its folder), read locally: replaces the profile's model.")
@click.option("--kv-dtype", default=None, help="vLLM's --kv-cache-dtype: auto, bfloat16, fp8, fp8_ds_mla ...")
@click.option("--context", required=True, help="Tokens per request (context length): 131072, 128k.")
@click.option("--concurrency", type=click.IntRange(1, 100000), required=True, help="Requests at once, per instance.")
@click.option("--reuse-window", type=click.IntRange(1), default=None,
              help="Recent contexts that should come back without recompute: L2 holds them (default 16 x concurrency).")
@click.option("--l1-rounds", type=click.IntRange(0, 1000), default=4, show_default=True,
              help="L1 (DRAM) holds the contexts of this many recent rounds of `concurrency` requests.")
@click.option("--output-tokens", type=click.IntRange(1, 1 << 20), default=64, show_default=True,
              help="Tokens generated per request in the predictions.")
@click.option("--slo", default=None, help="e.g. 'ttft_p50<=12s' or 'ttft_p50<=12s,output_tps>=70'.")
@click.option("--gpu", "gpu_kind", default=None, help="GPU kind: h100, h200, b200, mi300x, mi308x, 910b.")
@click.option("--gpus", type=click.IntRange(1, 4096), default=None, help="GPUs per host.")
@click.option("--hbm-gb", type=click.FloatRange(min=1), default=None, help="HBM per GPU, GB.")
@click.option("--tp", type=click.IntRange(1, 1024), default=None, help="Tensor parallel size.")
@click.option("--pp", type=click.IntRange(1, 1024), default=None, help="Pipeline parallel size.")
@click.option("--gpu-memory-utilization", type=click.FloatRange(0.05, 1.0), default=None, help="vLLM's fraction.")
@click.option("--weights-gb", type=click.FloatRange(min=0), default=None, help="Weights in GB (default: estimated).")
@click.option("--host-dram-gb", type=click.FloatRange(min=1), default=None, help="Host DRAM, GB (caps L1).")
@click.option("--ssds", type=click.IntRange(1, 1024), default=None, help="SSDs in the L2 array.")
@click.option("--ssd-read-gbs", type=click.FloatRange(min=0.01), default=None, help="Read GB/s per SSD.")
@click.option("--ssd-write-gbs", type=click.FloatRange(min=0.01), default=None, help="Write GB/s per SSD.")
@click.option("--nic-gbits", type=click.FloatRange(min=1), default=None, help="NVMe-oF link rate, Gb/s per link.")
@click.option("--links", type=click.IntRange(1, 64), default=None, help="NVMe-oF links used together.")
@click.option("--sweep", default=None, help="ssds=1..8, links=1..4, l1-gb=0,64,256 or concurrency=4,8,16,32.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --sweep: the plot's PNG (default fxctl-plan-PARAM.png here).")
@click.option("--write-profile", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the planned profile (tier sizes, SSDs, links) for fxctl serve and fxctl tune.")
@click.option("--force", is_flag=True, help="With --write-profile: replace an existing file.")
@click.pass_obj
def command(app: App, profile_name, model_config, kv_dtype, context, concurrency, reuse_window, l1_rounds,
            output_tokens, slo, gpu_kind, sweep, plot, write_profile, force, host_dram_gb, ssd_write_gbs,
            **hardware):
    from fxctl.plan.render import render_plan, render_sweep
    from fxctl.plan.run import PlanRequest, run_plan, run_sweep, write_planned_profile

    request = PlanRequest(profile_name, model_config, kv_dtype, tokens(context, "--context"), concurrency,
                          reuse_window, l1_rounds, output_tokens, slo, gpu_kind, hardware, host_dram_gb,
                          ssd_write_gbs)
    if write_profile is not None and write_profile.exists() and not force:
        raise BadInput(f"{write_profile} exists", "pass --force to replace it, or choose another path")
    if sweep:
        result = run_sweep(request, sweep, plot)
        emit(result, app.output_format, **render_sweep(result, EMULATOR))
        return
    plan = run_plan(request)
    if write_profile is not None:
        write_planned_profile(plan, write_profile)
    emit(plan.to_dict() | {"written_profile": str(write_profile) if write_profile else None}, app.output_format,
         **render_plan(plan, EMULATOR, write_profile))
    if plan.meets is False and not (plan.recommended or {}).get("met_by"):
        raise FxError("no hardware up to the search's limits meets the SLO in cold recovery",
                      "see the notes: a shorter context, a looser SLO, or more L1", exit_code=ExitCode.SLO_NOT_MET)
