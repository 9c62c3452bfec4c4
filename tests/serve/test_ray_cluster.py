"""A Ray deployment (one model across hosts, issue 17.2) as data: golden commands for 2 and 4 hosts, what is
refused, the facts' parsers on real output, stop phases, and the cross-host version comparison.

Regenerate the goldens with FXCTL_UPDATE_GOLDEN=1 (then review the diff)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxctl.errors import BadInput
from fxctl.serve import ray_cluster
from fxctl.serve.deploy import STOP_PHASES
from fxctl.serve.settings import settings_from
from fxctl.sim.profile import load_profile
from tests.golden import check_golden

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "serve"
PYTHON = "/opt/fxctl/serving-env/bin/python"
CASES = {   # golden file -> profile, pp, tp, host count
    "ray-cpu-tiny-2hosts-pp2": ("cpu-tiny", 2, 1),
    "ray-h200-70b-2hosts-pp2-tp2": ("h200-70b", 2, 2),
    "ray-h200-70b-4hosts-pp4-tp2": ("h200-70b", 4, 2),
}


def settings(profile: str, pp: int, tp: int, **overrides):
    return settings_from(load_profile(profile), pipeline_parallel=pp, tensor_parallel=tp, offload="none",
                         l2_dir="/mnt/kvtier/fxtier", python=PYTHON, **overrides)


def nodes(count: int) -> list[tuple[str, str]]:
    return [(f"gpu{i}", f"10.0.0.{11 + i}") for i in range(count)]


def stop_phases(plans) -> list[list[str]]:
    """Which units each of fxctl serve stop's phases ends (fxctl.serve.deploy.STOP_PHASES), in order."""
    named = {role for phase in STOP_PHASES if phase for role in phase}
    return [[f"{p.host}:{p.unit}" for p in plans if (p.role not in named if phase is None else p.role in phase)]
            for phase in STOP_PHASES]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_ray_deployment(case):
    profile, pp, tp = CASES[case]
    chosen = settings(profile, pp, tp)
    plans = ray_cluster.plan_cluster(chosen, nodes(pp))
    got = {"start_order": [{"host": p.host, "role": p.role, "unit": p.unit, "command_line": p.shell_line(),
                            "log_path": p.log_path} for p in plans],
           "cluster_check": ray_cluster.status_command(ray_cluster.ray_bin(chosen),
                                                        ray_cluster.gcs_address(chosen, "10.0.0.11")).render(),
           "stop_phases": stop_phases(plans)}
    path = GOLDEN / f"{case}.json"
    check_golden(path, json.loads(path.read_text()) if path.exists() else {}, got)


def test_two_cpu_hosts_head_worker_and_vllm_over_ray():
    plans = ray_cluster.plan_cluster(settings("cpu-tiny", 2, 1), nodes(2))
    head, worker, engine = plans
    assert [head.role, worker.role, engine.role] == ["ray-head", "ray-worker", "engine"]
    assert head.host == engine.host == "gpu0" and worker.host == "gpu1"
    assert "--head" in head.argv and worker.argv[worker.argv.index("--address") + 1] == "10.0.0.11:8700"
    assert worker.argv[worker.argv.index("--node-ip-address") + 1] == "10.0.0.12"
    assert head.argv[0] == "/opt/fxctl/serving-env/bin/ray" and "--include-dashboard=false" in head.argv
    argv = engine.argv
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
    assert engine.env["RAY_ADDRESS"] == "10.0.0.11:8700" and engine.env["VLLM_HOST_IP"] == "10.0.0.11"
    # vLLM on CPU: fxctl's platform plugin switched on for vLLM and every node's Ray workers, GPU slots = tp
    assert {p.env["FXCTL_VLLM_CPU_RAY"] for p in plans} == {"1"}
    assert head.argv[head.argv.index("--num-gpus") + 1] == "1"
    assert head.data_dir != worker.data_dir and len(head.data_dir) < 30   # Ray's socket paths stay short


def test_gpu_hosts_pin_the_stage_gpus_on_the_node_not_on_vllm():
    head, worker, engine = ray_cluster.plan_cluster(settings("h200-70b", 2, 2), nodes(2))
    assert head.env["CUDA_VISIBLE_DEVICES"] == worker.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "CUDA_VISIBLE_DEVICES" not in engine.env and "FXCTL_VLLM_CPU_RAY" not in engine.env
    assert engine.argv[:2] == ("/opt/fxctl/serving-env/bin/vllm", "serve")


@pytest.mark.parametrize("pp,hosts,match", [(2, 1, "one serving host per stage"), (2, 3, "got 3"),
                                            (4, 2, "got 2")])
def test_one_host_per_stage(pp, hosts, match):
    with pytest.raises(BadInput, match=match):
        ray_cluster.plan_cluster(settings("cpu-tiny", pp, 1), nodes(hosts))


@pytest.mark.parametrize("overrides,match", [({"offload": "fxctl"}, "offload none"),
                                             ({"instances": 2}, "1 instance"), ({"engine": "sim"}, "engine vllm")])
def test_refused_combinations(overrides, match):
    with pytest.raises(BadInput, match=match):
        settings_from(load_profile("cpu-tiny"), **{"pipeline_parallel": 2, "offload": "none",
                                                   "l2_dir": "/mnt/kv", **overrides})


def test_ray_ports_stay_in_range():
    with pytest.raises(BadInput, match="must stay under 65536"):
        ray_cluster.plan_cluster(settings("cpu-tiny", 2, 1, port=65000), nodes(2))


def test_status_parser_on_real_output():
    text = (GOLDEN / "ray-status-two-nodes.txt").read_text()   # `ray status`, 2 nodes on this machine
    state = ray_cluster.parse_status(text)
    assert state == {"nodes": 2, "resources": {"CPU": [0.0, 2.0], "fxctl_cpu": [0.0, 2.0]}, "placement_groups": {}}
    # while vLLM runs, its placement group holds the worker slots (the line as ray/autoscaler/_private/util.py
    # writes it)
    held = text.replace(" 0.0/2.0 CPU\n", " 2.0/2.0 GPU (2.0 used of 2.0 reserved in placement groups)\n")
    assert ray_cluster.parse_status(held)["placement_groups"] == {"GPU": [2.0, 2.0]}
    assert ray_cluster.parse_status(held)["resources"]["GPU"] == [2.0, 2.0]
    assert ray_cluster.parse_status("ConnectionError: Could not find any running Ray instance.") is None
    chosen = settings("cpu-tiny", 2, 1)
    assert not ray_cluster.cluster_complete(state, chosen)    # no GPU slots: vLLM could not place its stages
    state["resources"]["GPU"] = [0.0, 2.0]
    assert ray_cluster.cluster_complete(state, chosen)
    state["nodes"] = 1
    assert not ray_cluster.cluster_complete(state, chosen)


def test_leftovers_by_temp_dir():
    temp = "/tmp/fxray-42e42aef36-1"
    ps = (f" 101 /env/bin/ray start --block --temp-dir {temp} --disable-usage-stats\n"
          f" 102 /env/ray/core/src/ray/raylet/raylet --raylet_socket_name={temp}/session_1/sockets/raylet\n"
          f" 103 /env/ray/core/src/ray/gcs/gcs_server --log_dir={temp}0/session_1/logs\n"   # another node's
          " 104 ray::IDLE\n")
    assert [line.split()[0] for line in ray_cluster.leftovers(ps, temp)] == ["101", "102"]


def test_versions_must_match_across_hosts():
    same = {"python": "3.11.2", "ray": "2.60.0", "vllm-cpu": "0.32.0"}
    assert ray_cluster.mismatches({"a": same, "b": dict(same)}) == []
    differ = ray_cluster.mismatches({"a": same, "b": {**same, "ray": "2.59.0", "python": "3.12.1"}})
    assert differ == ["python: 3.11.2 on a, 3.12.1 on b", "ray: 2.60.0 on a, 2.59.0 on b"]


def test_saved_plans_of_hosts_that_share_a_filesystem():
    chosen = settings("cpu-tiny", 2, 1)
    saved = [(p, "process") for p in ray_cluster.plan_cluster(chosen, nodes(2))]

    class Machine:
        name = "gpu1"

    assert [p.role for p, _ in ray_cluster.on_this_host(Machine(), saved)] == ["ray-worker"]


def test_platform_plugin_only_where_switched_on(monkeypatch):
    from fxctl.serve.vllm_cpu_ray import register

    monkeypatch.delenv("FXCTL_VLLM_CPU_RAY", raising=False)
    assert register() is None
    monkeypatch.setenv("FXCTL_VLLM_CPU_RAY", "1")
    assert register() == "fxctl.serve.vllm_cpu_ray_platform.CpuRayPlatform"


def test_status_cell_of_a_ray_head():
    from fxctl.cli.serve_cmd import cluster_cell

    state = ray_cluster.parse_status((GOLDEN / "ray-status-two-nodes.txt").read_text())
    assert cluster_cell(state) == "Ray: 2 nodes, CPU 0/2 in use"
    assert cluster_cell(None) == ""


def test_stop_ends_vllm_then_workers_then_the_head(tmp_path, monkeypatch):
    """Saved plans of a Ray deployment whose two nodes share this machine: fxctl serve stop ends the engine in
    one phase, the worker node in the next, the head last."""
    import json as _json

    from fxctl.remote.machine import LOCAL
    from fxctl.serve import deploy
    from fxctl.serve.where import Where

    chosen = settings("cpu-tiny", 2, 1, state_dir=str(tmp_path))
    plans = ray_cluster.plan_cluster(chosen, [(LOCAL, "10.0.0.11"), (LOCAL, "10.0.0.12")])
    for plan in plans:
        Path(plan.state_path).parent.mkdir(parents=True, exist_ok=True)
        Path(plan.state_path).write_text(_json.dumps({"mode": "process", "plan": plan.to_dict()}))
    ended = []
    monkeypatch.setattr(ray_cluster, "stop_node", lambda machine, plan, mode: ended.append(plan.unit) or False)
    outcome = deploy.stop(Where(), str(tmp_path), "main")[LOCAL]
    assert outcome.ok and ended == ["fxctl-serve-main-0", "fxctl-ray-main-1", "fxctl-ray-main-0"]


def test_a_ray_deployment_needs_its_hosts():
    from fxctl.serve import ray_deploy
    from fxctl.serve.where import Where

    with pytest.raises(BadInput, match="one serving host per stage"):
        ray_deploy.start(settings("cpu-tiny", 2, 1), Where(), ready_timeout=1)


def test_a_nodes_versions_or_what_its_python_said():
    from fxctl.serve.ray_cluster import NodeVersions

    said = '{"python": "3.11.2", "plugins": [], "ray": "2.49.0"}\n'
    assert NodeVersions("py").parse(said) == {"python": "3.11.2", "plugins": [], "ray": "2.49.0"}
    assert NodeVersions("py").parse("sh: 1: /env/bin/python: not found\n", 127) == {
        "error": "sh: 1: /env/bin/python: not found"}
