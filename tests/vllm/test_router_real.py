"""Two real vLLM replicas on CPU on two "hosts" behind fxctl serve's router (vllm-router) (issue 17.3).

The hosts are sshd endpoints on this machine, each in its own network namespace (its own address on a
bridge, so both use the same ports, as two machines would) and mount namespace (its own /var/lib/fxctl:
state and L2), deployed to over SSH from one inventory (tests/support/netns_hosts.py). Each host runs its
LMCache server (fxctl's tier as L2) and one vLLM; the router runs on the first host and reaches the other
host's vLLM at its inventory address.

About 2-5 minutes on 2 cores: start, prefix affinity with consistent_hash (each prefix a session) and then
round_robin (the router restarted through fxctl serve, the engines kept), status per host, a full restart and
cold recovery through the router (the prompts' KV from each host's L2), stop (router first).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fxctl.loadgen.affinity import run_affinity
from tests.support.netns_hosts import available, known_hosts, start_hosts, stop_hosts
from tests.support.sshd import keygen

PORT = 8241
NAME = "rt"


@pytest.fixture
def two_hosts(serving_python, tiny_model):
    why = available()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"namespaced hosts: {why}")
        pytest.skip(f"namespaced hosts: {why}")
    folder = Path(tempfile.mkdtemp(prefix="fxctl-nshosts-"))
    folder.chmod(0o755)
    key = keygen(folder / "client_key")
    hosts = start_hosts(folder, 2, key.with_suffix(".pub"))
    try:
        (folder / "known_hosts").write_text(known_hosts(hosts))
        inventory = folder / "inventory.yaml"
        inventory.write_text(f"""version: 1
defaults: {{user: root, key: {key}, known_hosts: {folder}/known_hosts, connect_timeout: 10}}
hosts:
  h0: {{address: {hosts[0].address}}}
  h1: {{address: {hosts[1].address}}}
serve:
  hosts: [h0, h1]
  profile: cpu-tiny
  model: {tiny_model}
  python: {serving_python}
  l2_dir: /var/lib/fxctl/l2
  port: {PORT}
  router: {{policy: consistent_hash}}
""")
        install_fxctl(serving_python)
        yield inventory, [h.address for h in hosts]
    finally:
        stop_hosts(hosts)
        shutil.rmtree(folder, ignore_errors=True)


def install_fxctl(python: str) -> None:
    """This checkout's wheel into the serving env once, before both hosts' pre-flight (which then runs with
    --no-install: two hosts sharing one env must not pip-install into it at the same time)."""
    from fxctl.serve import wheel

    built = wheel.build_wheel()
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
                           str(built)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def fxctl(inventory: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", "-i", str(inventory), *args],
                          capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def own_share(run) -> float:
    return sum(r["prefix_hits"] for r in run.replicas) / sum(r["prefix_queries"] for r in run.replicas)


def test_two_hosts_behind_the_router(two_hosts):
    from fxctl.inventory import load_inventory
    from fxctl.serve import deploy
    from fxctl.serve.settings import REMOTE_STATE
    from fxctl.serve.where import select

    inventory, addresses = two_hosts
    router = f"http://{addresses[0]}:{PORT + 80}"
    engines = [f"http://{a}:{PORT}" for a in addresses]
    try:
        started = fxctl(inventory, "serve", "start", "--no-install")
        assert started.returncode == 0, started.stdout + started.stderr
        out = json.loads(started.stdout)
        assert [i["unit"] for i in out["h0"]["instances"]] == ["fxctl-lmcache-main", "fxctl-serve-main-0",
                                                               "fxctl-router-main"]
        assert [i["unit"] for i in out["h1"]["instances"]] == ["fxctl-lmcache-main", "fxctl-serve-main-0"]
        assert out["h0"]["endpoint"] == f"{router}/v1"
        checks = {c["check"]: c["status"] for c in out["h0"]["checks"]}
        assert checks["python:vllm-router"] == "ok" and checks["router workers"] == "ok"

        # consistent_hash on the session header: every ask of a prefix on the replica that holds it
        aware = run_affinity(router, engines, None, "consistent_hash", salt="aware")
        print("consistent_hash:", json.dumps(aware.to_dict()))
        assert aware.docs_on_one_replica == 3
        where = select(load_inventory(inventory), (), False)
        changed = deploy.set_router_policy(where, REMOTE_STATE, "main", "round_robin", ready_timeout=300)
        assert all(o.ok for o in changed.values()), {h: o.error for h, o in changed.items()}
        spread = run_affinity(router, engines, None, "round_robin", salt="spread")
        print("round_robin:", json.dumps(spread.to_dict()))
        assert sorted(r["requests"] for r in spread.replicas) == [4.0, 5.0]       # 9 requests, alternating
        assert spread.docs_on_one_replica == 0           # each prefix computed on both hosts (own LMCache each)
        assert own_share(aware) > own_share(spread)

        status = json.loads(fxctl(inventory, "serve", "status").stdout)
        rows = {h["host"]: h for h in status["hosts"]}
        # served since the engine started: the start's warm-up completion (fxctl.serve.warm_up), then the load
        assert {h: (r["engines"], r["ready"], r["served"]["requests"]) for h, r in rows.items()} == {
            "h0": (1, 1, 1 + aware.replicas[0]["requests"] + spread.replicas[0]["requests"]),
            "h1": (1, 1, 1 + aware.replicas[1]["requests"] + spread.replicas[1]["requests"])}
        assert all(r["tier"]["l2"]["write_bytes"] > 0 for r in rows.values())   # each host's LMCache server's tier
        (routed,) = [s for s in status["instances"] if s["unit"] == "fxctl-router-main"]
        assert routed["host"] == "h0" and routed["state"] == "ready"
        assert sorted(w["requests"] for w in routed["load"]["workers"].values()) == [4.0, 5.0]   # since its restart

        # cold recovery through the router: every process on both hosts restarted, prompts both hosts stored
        restarted = fxctl(inventory, "serve", "restart")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        again = run_affinity(router, engines, None, "round_robin", salt="spread", asks=1)
        print("after restart:", json.dumps(again.to_dict()))
        assert sum(r["requests"] for r in again.replicas) == 3.0
        assert sum(r["external_hits"] for r in again.replicas) >= 3 * 512, "the KV did not come back from L2"
    finally:
        stopped = fxctl(inventory, "serve", "stop")
    units = [(s["host"], s["unit"]) for s in json.loads(stopped.stdout)["stopped"]]
    assert units[0] == ("h0", "fxctl-router-main")                              # the router first
    assert ("h1", "fxctl-lmcache-main") in units and len(units) == 5
