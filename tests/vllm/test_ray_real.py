"""One model across two "hosts" (issue 17.2/17.3): real sshd endpoints on 127.0.0.2 and 127.0.0.3 (Ray needs a
node IP per host, and turns 127.0.0.1 into the machine's own address), `fxctl serve start --pp 2` over SSH: a Ray
head on the first, a Ray worker node on the second, real vLLM on CPU with the tiny model split 3+3 layers over the
two Ray nodes; completions through it; status; stop leaves no process of either node.

Budget: about 3-5 minutes on 2 cores (two Ray nodes, vLLM's API server, engine core and two stage workers)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.sshd import keygen, start_sshd

pytestmark = pytest.mark.sshd
PORT = 8311
NAME = "raytest"
PROMPT = "The capital of France is a city where"


@pytest.fixture
def two_hosts(tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="fxctl-ray-sshd-"))
    folder.chmod(0o755)
    client_key = keygen(folder / "client_key")
    servers = [start_sshd(folder / f"host{i}", f"host{i}", client_key.with_suffix(".pub"), address=f"127.0.0.{i + 2}")
               for i in range(2)]
    known = folder / "known_hosts"
    known.write_text("".join(s.known_hosts_line() for s in servers))
    inventory = tmp_path / "inv.yaml"
    hosts = "".join(f"  {s.name}: {{address: {s.address}, port: {s.port}}}\n" for s in servers)
    inventory.write_text(f"version: 1\ndefaults:\n  user: root\n  key: {client_key}\n  known_hosts: {known}\n"
                         f"hosts:\n{hosts}serve:\n  hosts: [host0, host1]\n")
    yield inventory
    fxctl("-i", str(inventory), "serve", "stop", "--name", NAME, timeout=300)
    for server in servers:
        server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def fxctl(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def ray_processes(temp_dirs: list[str]) -> list[str]:
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line.strip() for line in ps.splitlines() if any(t in line for t in temp_dirs)]


def test_two_hosts_one_model_over_ray(two_hosts, serving_python, tiny_model, tmp_path):
    inventory = str(two_hosts)
    clock = time.monotonic()
    started = fxctl("-i", inventory, "serve", "start", "--name", NAME, "--profile", "cpu-tiny", "--pp", "2",
                    "--offload", "none", "--python", serving_python, "--model", tiny_model,
                    "--l2-dir", str(tmp_path / "l2"), "--port", str(PORT), "--ready-timeout", "400")
    assert started.returncode == 0, started.stdout[-4000:] + started.stderr[-4000:]
    start_s = time.monotonic() - clock
    hosts = json.loads(started.stdout)
    checks = {c["check"]: c["status"] for c in hosts["host0"]["checks"]}
    assert checks["python:ray"] == "ok" and checks["vllm platform plugin"] == "ok"
    assert checks["same versions"] == "ok" and checks["ray ports"] == "ok"
    head, engine = hosts["host0"]["instances"]
    (worker,) = hosts["host1"]["instances"]
    assert "ray start --block --head" in head["command_line"] and "--node-ip-address 127.0.0.2" in head["command_line"]
    assert "--address 127.0.0.2:9011" in worker["command_line"] and "127.0.0.3" in worker["command_line"]
    assert "--pipeline-parallel-size 2 --distributed-executor-backend ray" in engine["command_line"]
    assert engine["models"] == [tiny_model]
    assert engine["warm_up"].startswith("warmed up: one streamed completion"), engine   # through both stages
    assert head["warm_up"] == worker["warm_up"] == ""                                  # Ray nodes serve nothing

    status = json.loads(fxctl("-i", inventory, "serve", "status", "--name", NAME).stdout)["instances"]
    by_role = {s["role"]: s for s in status}
    assert {s["engine"] for s in status} == {"vllm"}                     # the engine each process belongs to
    assert by_role["ray-head"]["cluster"]["nodes"] == 2                  # the head counts both nodes
    assert by_role["ray-head"]["cluster"]["placement_groups"]["GPU"] == [2.0, 2.0]   # vLLM's stages hold both slots
    assert by_role["engine"]["state"] == "ready" and by_role["ray-worker"]["running"]

    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="unused", timeout=300)
    clock = time.monotonic()
    answers = [client.completions.create(model=tiny_model, prompt=PROMPT, max_tokens=8, temperature=0)
               for _ in range(2)]
    completion_s = (time.monotonic() - clock) / 2
    assert all(a.usage.completion_tokens == 8 for a in answers)
    assert answers[0].choices[0].text == answers[1].choices[0].text   # greedy: the same through both stages

    temp_dirs = [head["tier"].rsplit("temp dir ", 1)[1], worker["tier"].rsplit("temp dir ", 1)[1]]
    assert len(ray_processes(temp_dirs)) >= 4                           # raylet, GCS, monitors while it runs
    clock = time.monotonic()
    stopped = fxctl("-i", inventory, "serve", "stop", "--name", NAME, timeout=300)
    stop_s = time.monotonic() - clock
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    ended = {(s["host"], s["unit"]): s["was_running"] for s in json.loads(stopped.stdout)["stopped"]}
    assert ended == {("host0", f"fxctl-serve-{NAME}-0"): True, ("host0", f"fxctl-ray-{NAME}-0"): True,
                     ("host1", f"fxctl-ray-{NAME}-1"): True}   # in phases: vLLM, the worker, the head
    assert ray_processes(temp_dirs) == []
    print(f"\nRay pp=2 over 2 sshd hosts: serve start {start_s:.0f} s (pre-flight, head, worker, vLLM ready), "
          f"8-token completion {completion_s:.2f} s, serve stop {stop_s:.0f} s, "
          f"text {answers[0].choices[0].text!r}")
