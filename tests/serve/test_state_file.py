"""What `fxctl serve` keeps on a host about each process (instance.json): typed roles, a schema version, and a
file it cannot read named instead of skipped (a skipped instance would be left running by stop)."""

from __future__ import annotations

import json

import pytest

from fxctl.errors import FxError
from fxctl.remote.machine import LocalMachine
from fxctl.serve import launch
from fxctl.serve.launch import STATE_SCHEMA, saved_plans, start_instance, stop_instance
from fxctl.serve.render import plan_instances
from fxctl.serve.roles import Role
from fxctl.serve.settings import settings_from
from fxctl.sim.profile import load_profile


@pytest.fixture
def started(tmp_path, monkeypatch):
    """An engine plan of a vLLM deployment started as a plain process (argv: sleep), and its machine."""
    import dataclasses

    settings = settings_from(load_profile("cpu-tiny"), engine="vllm", l2_dir=str(tmp_path / "l2"),
                             python="/usr/bin/python3", state_dir=str(tmp_path / "state"), name="st")
    server, engine = plan_instances(settings, "local")
    assert (server.role, engine.role) == (Role.LMCACHE_SERVER, Role.ENGINE)
    plan = dataclasses.replace(engine, argv=("sleep", "60"))
    monkeypatch.setattr(launch, "has_systemd", lambda machine: False)
    machine = LocalMachine()
    start_instance(machine, plan)
    yield machine, plan, str(tmp_path / "state")
    stop_instance(machine, plan, "process")


def test_state_has_a_schema_and_reads_back_typed(started):
    machine, plan, state_dir = started
    data = json.loads(open(plan.state_path).read())
    assert data["schema"] == STATE_SCHEMA and data["plan"]["role"] == "engine"
    ((back, mode),) = saved_plans(machine, state_dir, "st")
    assert back == plan and back.role is Role.ENGINE and mode == "process"


def test_a_state_file_fxctl_cannot_read_is_named_not_skipped(started):
    machine, plan, state_dir = started
    with open(plan.state_path, "w") as out:
        out.write('{"mode": "process", "plan": {"deploym')   # cut short (a full disk, an editor)
    with pytest.raises(FxError, match=f"{plan.state_path} is not an instance state fxctl can read") as caught:
        saved_plans(machine, state_dir)
    assert "stop it by hand" in caught.value.hint
    with open(plan.state_path, "w") as out:   # a role no fxctl knows
        json.dump({"schema": 1, "mode": "process", "plan": {**plan.to_dict(), "role": "sidecar"}}, out)
    with pytest.raises(FxError, match="'sidecar' is not a valid Role"):
        saved_plans(machine, state_dir, "st")


def test_a_newer_schema_is_refused_and_an_older_file_without_one_reads(started):
    machine, plan, state_dir = started
    with open(plan.state_path, "w") as out:
        json.dump({"schema": STATE_SCHEMA + 1, "mode": "process", "plan": plan.to_dict()}, out)
    with pytest.raises(FxError, match=f"state schema {STATE_SCHEMA + 1}; this fxctl reads up to {STATE_SCHEMA}"):
        saved_plans(machine, state_dir, "st")
    old = {k: v for k, v in plan.to_dict().items() if k != "data_dir"}
    with open(plan.state_path, "w") as out:   # what fxctl wrote before the schema field (data_dir was l2_path)
        json.dump({"mode": "process", "plan": {**old, "l2_path": plan.data_dir}}, out)
    assert [p for p, _ in saved_plans(machine, state_dir, "st")] == [plan]


def test_every_process_has_its_number_among_its_role_and_an_id_of_its_own(tmp_path):
    """No negative indices (issue 32 #3): engines 0..n-1, Ray nodes 0..m-1, the server and the router 0."""
    from fxctl.serve import ray_cluster, router

    def settings(name="dep", **more):
        return settings_from(load_profile("cpu-tiny"), engine="vllm", l2_dir=str(tmp_path / "l2"),
                             python="/usr/bin/python3", state_dir=str(tmp_path / "state"), name=name, **more)

    plans = plan_instances(settings(instances=2), "local")
    plans.append(router.plan_router(settings(instances=2), "local", ["http://127.0.0.1:8000"]))
    plans += ray_cluster.plan_cluster(settings("ray", pipeline_parallel=2, offload="none"),
                                      [("a", "10.0.0.1"), ("b", "10.0.0.2")])
    assert all(p.index >= 0 for p in plans)
    ids = [p.id for p in plans]
    assert len(set(ids)) == len(ids)
    assert set(ids) == {"dep-0", "dep-1", "dep-lmcache-server", "dep-router", "ray-ray-head-0", "ray-ray-worker-1",
                        "ray-0"}


def test_state_files_with_the_old_negative_indices_still_read(tmp_path):
    from fxctl.serve.render import InstancePlan

    settings = settings_from(load_profile("cpu-tiny"), engine="vllm", l2_dir=str(tmp_path / "l2"),
                             python="/usr/bin/python3", state_dir=str(tmp_path / "state"), name="old")
    server = plan_instances(settings, "local")[0]
    assert InstancePlan.from_dict({**server.to_dict(), "index": -1}).index == 0
    ray = {**server.to_dict(), "index": -3, "role": "ray-worker", "unit": "fxctl-ray-old-2"}
    assert InstancePlan.from_dict(ray).index == 2 and InstancePlan.from_dict(ray).id == "old-ray-worker-2"
