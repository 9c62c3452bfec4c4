"""Golden launch lines and LMCache configs for the shipped profiles, and what rendering refuses.

Regenerate with FXCTL_UPDATE_GOLDEN=1 (then review the diff)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from fxctl.errors import BadInput
from fxctl.inventory.model import ServeSpec
from fxctl.serve.render import KV_TRANSFER_CONFIG, plan_instances
from fxctl.serve.settings import settings_from
from fxctl.sim.profile import PROFILE_DIR, load_profile
from tests.golden import check_golden_file

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "serve"
L2_DIR = "/mnt/kvtier/fxtier"
PROFILES = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml") if p.stem != "fixed-delays")


def rendered(profile: str, engine: str, **overrides) -> dict:
    settings = settings_from(load_profile(profile), engine=engine, l2_dir=L2_DIR, python="/opt/vllm/bin/python3",
                             **overrides)
    plans = plan_instances(settings, "gpu1")
    return {"profile": profile, "engine": engine,
            "instances": [{"command_line": p.shell_line(), "env": p.env, "argv": list(p.argv), "port": p.port,
                           "gpus": list(p.gpus), "config_path": p.config_path,
                           "lmcache_yaml": p.lmcache_yaml(), "role": p.role} for p in plans]}


def engines(data: dict) -> list[dict]:
    return [i for i in data["instances"] if i["role"] == "engine"]


@pytest.mark.parametrize("engine", ["vllm", "sim"])
@pytest.mark.parametrize("profile", PROFILES)
def test_golden_launch(profile, engine):
    path = GOLDEN / f"{profile}.{engine}.json"
    got = rendered(profile, engine)
    check_golden_file(path, got)


def test_enforce_eager_is_a_switch_and_the_sim_has_no_such_flag():
    # cpu-tiny sets serving.enforce_eager: the flag alone, once; false (inventory or profile) leaves it out
    assert engines(rendered("cpu-tiny", "vllm"))[0]["argv"].count("--enforce-eager") == 1
    off = engines(rendered("cpu-tiny", "vllm", enforce_eager=False))[0]["argv"]
    assert "--enforce-eager" not in off and "False" not in off
    assert "--enforce-eager" not in engines(rendered("h200-70b", "vllm"))[0]["argv"]   # unset: vLLM's default
    assert "--enforce-eager" not in engines(rendered("cpu-tiny", "sim"))[0]["argv"]
    with pytest.raises(BadInput, match="enforce_eager 'yes': true or false"):
        rendered("cpu-tiny", "vllm", enforce_eager="yes")


def test_480b_tp4x2_two_instances_on_disjoint_gpus_and_ports():
    got = engines(rendered("mi308x-qwen3-coder-480b-tp4x2", "vllm"))
    assert [i["gpus"] for i in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [i["port"] for i in got] == [8000, 8001]
    assert [i["env"]["HIP_VISIBLE_DEVICES"] for i in got] == ["0,1,2,3", "4,5,6,7"]
    assert got[0]["env"]["CUDA_VISIBLE_DEVICES"] == got[0]["env"]["HIP_VISIBLE_DEVICES"]  # ROCm vLLM asserts equal
    assert got[0]["config_path"] is None and got[1]["config_path"] is None   # MP: the host's server holds L1/L2
    in_process = engines(rendered("mi308x-qwen3-coder-480b-tp4x2", "vllm", lmcache_mode="in-process"))
    assert in_process[0]["config_path"] != in_process[1]["config_path"]


def test_480b_tp8_in_process_line_is_the_field_facts_launch():
    line = engines(rendered("mi308x-qwen3-coder-480b-tp8", "vllm", lmcache_mode="in-process"))[0]["command_line"]
    assert line.startswith("LMCACHE_CONFIG_FILE=/var/lib/fxctl/serve/main/0/lmcache.yaml PYTHONHASHSEED=0 ")
    assert line.endswith("/opt/vllm/bin/vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 --port 8000 "
                         "--tensor-parallel-size 8 --max-num-seqs 256 --max-model-len 262144 "
                         "--max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 --block-size 16 "
                         "--kv-transfer-config "
                         "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'")
    words = shlex.split(line)
    assert json.loads(words[-1]) == json.loads(KV_TRANSFER_CONFIG)


def test_lmcache_config_has_the_plugin_and_stable_hashes():
    config = yaml.safe_load(engines(rendered("mi308x-qwen3-coder-480b-tp4x2", "vllm",
                                             lmcache_mode="in-process"))[1]["lmcache_yaml"])
    assert config["storage_plugins"] == ["fxtier"]
    assert config["pre_caching_hash_algorithm"] == "sha256_cbor"
    extra = config["extra_config"]
    assert extra["storage_plugin.fxtier.module_path"] == "fxctl.integrations.lmcache.storage_plugin"
    assert extra["fxtier.l2_path"] == f"{L2_DIR}/main-1"
    assert extra["fxtier.l2_bytes"] == 1099 * 10**9  # the profile's per-instance L2
    assert config["max_local_cpu_size"] > 0


def test_480b_tp8_dry_run_is_lmcache_mp_with_fxctls_adapter():
    """Issue 14: GPU hosts default to LMCache's MP mode: `lmcache server` with fxctl's tier as its L2 adapter,
    started first; vLLM with LMCacheMPConnector pointed at it; no in-process LMCache config."""
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp8"), l2_dir=L2_DIR,
                             python="/opt/vllm/bin/python3")
    server, engine = plan_instances(settings, "gpu1")
    assert server.is_server and server.unit == "fxctl-lmcache-main"
    argv = list(server.argv)
    assert argv[:5] == ["/opt/vllm/bin/python3", "-P", "-m", "lmcache.cli.main", "server"]
    assert argv[argv.index("--supported-transfer-mode") + 1] == "auto"
    assert argv[argv.index("--eviction-policy") + 1] == "LRU"
    adapter = json.loads(argv[argv.index("--l2-adapter") + 1])
    assert (adapter["type"], adapter["module_path"], adapter["class_name"]) == \
        ("plugin", "fxctl.integrations.lmcache.l2_adapter", "FxTierL2Adapter")
    assert adapter["adapter_params"]["l2_path"] == f"{L2_DIR}/main-mp"
    assert float(argv[argv.index("--l1-size-gb") + 1]) > 0
    kv = json.loads(engine.argv[engine.argv.index("--kv-transfer-config") + 1])
    assert kv["kv_connector"] == "LMCacheMPConnector"
    assert kv["kv_connector_extra_config"]["lmcache.mp.port"] == int(argv[argv.index("--port") + 1])
    assert engine.lmcache_config is None and "LMCACHE_CONFIG_FILE" not in engine.env
    assert engine.env["PYTHONHASHSEED"] == "0"


def test_cpu_host_runs_lmcache_mp_too_and_in_process_only_when_asked():
    from fxctl.serve.lmcache_mode import lmcache_mode, mode_line

    settings = settings_from(load_profile("cpu-tiny"), l2_dir=L2_DIR, python="/opt/vllm/bin/python3", model="/m")
    server, engine = plan_instances(settings, "local")
    assert lmcache_mode(settings) == "mp" and server.is_server and engine.gpus == ()
    assert "LMCacheMPConnector" in engine.shell_line() and engine.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in engine.env
    in_process = settings_from(load_profile("cpu-tiny"), l2_dir=L2_DIR, python="/opt/vllm/bin/python3", model="/m",
                               lmcache_mode="in-process")
    (engine,) = plan_instances(in_process, "local")
    assert "FxCpuLMCacheConnector" in engine.shell_line() and "deprecated" in mode_line(in_process)
    disk = settings_from(load_profile("cpu-tiny"), l2_dir=L2_DIR, python="/opt/vllm/bin/python3", model="/m",
                         offload="lmcache-disk")
    (engine,) = plan_instances(disk, "local")
    assert engine.lmcache_config["local_disk"] == f"file://{L2_DIR}/main-0/" and "LocalDiskBackend" in mode_line(disk)


def test_inventory_sizes_are_per_host_and_split_between_instances():
    spec = ServeSpec(hosts=("gpu1",), l1_bytes=64 << 30, l2_bytes=2 << 40, l2_dir="/mnt/a/fx", port=9000)
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), spec)
    assert (settings.instances, settings.port, settings.l2_dir) == (2, 9000, "/mnt/a/fx")
    assert settings.l1_bytes_per_instance == 32 << 30 and settings.l2_bytes_per_instance == 1 << 40


@pytest.mark.parametrize("override", [
    {"model": "x; rm -rf /"}, {"l2_dir": "relative/dir"}, {"l2_dir": "/mnt/$(reboot)"}, {"name": "Bad Name"},
    {"python": "python3; id"}, {"port": 65535, "instances": 2}, {"l2_dir": "/mnt/../etc"},
])
def test_values_that_would_reach_a_command_are_refused(override):
    with pytest.raises(BadInput):
        settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), **{"l2_dir": L2_DIR, **override})


def test_no_l2_dir_says_how_to_give_one():
    with pytest.raises(BadInput, match="L2 directory"):
        settings_from(load_profile("lab"))


def test_inventory_instances_1_wins_over_the_profiles_2():
    """Issue 16: `serve.instances: 1` in the inventory with the TP4x2 profile gives one instance: the merge is by
    what the inventory set, not by whether a value differs from a default."""
    spec = ServeSpec(hosts=("gpu1",), instances=1, l2_dir="/mnt/a/fx")
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), spec)
    assert settings.instances == 1
    assert [p.index for p in plan_instances(settings, "gpu1") if not p.is_server] == [0]
    assert settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), spec, instances=2).instances == 2


@pytest.mark.parametrize("field", ["model", "l2_dir", "python", "name"])
def test_a_value_with_a_trailing_newline_is_refused(field):
    value = {"model": "Qwen/Qwen3\n", "l2_dir": "/mnt/fx\n", "python": "python3\n", "name": "main\n"}[field]
    with pytest.raises(BadInput):
        settings_from(load_profile("mi308x-qwen3-coder-480b-tp8"), **{"l2_dir": L2_DIR, field: value})


def test_dev_endpoints_do_not_unpin_the_gpus():
    from dataclasses import replace as with_

    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), l2_dir=L2_DIR)
    engine = [p for p in plan_instances(with_(settings, dev_endpoints=True), "gpu1") if not p.is_server][1]
    assert engine.env["VLLM_SERVER_DEV_MODE"] == "1" and engine.env["HIP_VISIBLE_DEVICES"] == "4,5,6,7"


def test_lmcache_own_persistent_adapters_replace_only_the_l2_adapter():
    """--offload lmcache-fs-native / lmcache-fs / lmcache-raw-block (issue 28 #1): the same MP server, the
    same L1 and chunk size, only --l2-adapter changed; no fxctl tier metrics; raw_block's slot holds its
    header and one chunk of the profile's model, on a device file made before the server starts."""
    import json as json_

    from fxctl.integrations.lmcache.server import RAW_BLOCK_META

    def server_of(offload):
        settings = settings_from(load_profile("cpu-tiny"), l2_dir=L2_DIR, python="/opt/vllm/bin/python3",
                                 model="/m", offload=offload)
        server, engine = plan_instances(settings, "local")
        argv = list(server.argv)
        return settings, server, engine, json_.loads(argv[argv.index("--l2-adapter") + 1]), argv

    ours = server_of("fxctl")
    assert ours[3]["type"] == "plugin" and ours[3]["adapter_params"]["model"] == "/m" and ours[1].metrics_port
    assert ours[0].kv_chunk_bytes == 256 * 3072          # 6 layers x 2 x 2 heads x 64 x 2 B a token
    for offload, kind in (("lmcache-fs-native", "fs_native"), ("lmcache-fs", "fs"), ("lmcache-raw-block", "raw_block")):
        settings, server, engine, spec, argv = server_of(offload)
        assert spec["type"] == kind and server.metrics_port == 0 and "LMCacheMPConnector" in engine.shell_line()
        same = [a for a in argv if a != argv[argv.index("--l2-adapter") + 1]]
        assert same == [a for a in ours[4] if a != ours[4][ours[4].index("--l2-adapter") + 1]]
        if kind != "raw_block":
            assert spec["use_odirect"] is True and spec["eviction"] == {"eviction_policy": "LRU"}
            assert spec["max_capacity_gb"] == settings.l2_bytes_per_instance / 1e9 and server.device_file is None
        else:
            assert spec["slot_bytes"] == 256 * 3072 + 4096 and spec["slot_bytes"] % 4096 == 0
            slots = settings.l2_bytes_per_instance // spec["slot_bytes"]
            assert spec["capacity_bytes"] == RAW_BLOCK_META + slots * spec["slot_bytes"]
            assert server.device_file == (spec["device_path"], spec["capacity_bytes"])
            assert spec["device_path"] == f"{server.data_dir}/raw_block.img"


def test_raw_block_without_a_model_shape_says_what_it_needs():
    from dataclasses import replace

    from fxctl.integrations.lmcache.server import lmcache_adapter_spec

    settings = settings_from(load_profile("cpu-tiny"), l2_dir=L2_DIR, python="/p", model="/m",
                             offload="lmcache-raw-block")
    with pytest.raises(BadInput, match="needs the model's KV size per chunk"):
        plan_instances(replace(settings, kv_chunk_bytes=0), "local")   # a profile without the model's shape
    with pytest.raises(ValueError, match="not one of LMCache's persistent adapters"):
        lmcache_adapter_spec("nixl", "/d", 1 << 30)
    with pytest.raises(ValueError, match="multiple of 4096"):
        lmcache_adapter_spec("raw_block", "/d", 1 << 30, slot_bytes=1000)


def test_each_vllm_process_counts_its_metrics_in_a_directory_of_its_own_emptied_at_start(tmp_path, monkeypatch):
    # LMCache's in-process logger otherwise points every process on the host at /tmp/lmcache_prometheus, and
    # vLLM's /metrics sums whatever is there: CI saw the LMCache server's tier errors on the engine's target
    import dataclasses
    import os
    import time

    from fxctl.remote.machine import LocalMachine
    from fxctl.serve import launch
    from fxctl.serve.launch import instance_alive, start_instance, stop_instance

    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), engine="vllm", l2_dir=str(tmp_path / "l2"),
                             python="/opt/vllm/bin/python3", state_dir=str(tmp_path / "state"))
    plans = plan_instances(settings, "gpu1")
    dirs = [p.env["PROMETHEUS_MULTIPROC_DIR"] for p in plans]
    assert [p.role for p in plans] == ["lmcache-server", "engine", "engine"] and len(set(dirs)) == 3
    for plan, where in zip(plans, dirs):
        assert where == plan.state_path.rsplit("/", 1)[0] + "/prometheus"
    assert "PROMETHEUS_MULTIPROC_DIR" not in plan_instances(settings_from(
        load_profile("cpu-tiny"), engine="sim", l2_dir=L2_DIR), "h")[0].env   # the emulator keeps its registry

    # what a previous run of the instance left there is gone when it starts again, and its process sees the path
    plan = dataclasses.replace(plans[1], argv=("sleep", "60"))
    os.makedirs(dirs[1])
    (Path(dirs[1]) / "counter_12345.db").write_bytes(b"stale")
    machine = LocalMachine()
    monkeypatch.setattr(launch, "has_systemd", lambda machine: False)   # a plain process, on any test host
    assert start_instance(machine, plan) == "process"
    try:
        assert os.listdir(dirs[1]) == []
        deadline = time.monotonic() + 10
        while not instance_alive(machine, plan, "process") and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = (Path(plan.state_path).parent / "pid").read_text().strip()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"PROMETHEUS_MULTIPROC_DIR={dirs[1]}".encode() in environ
    finally:
        assert stop_instance(machine, plan, "process")
