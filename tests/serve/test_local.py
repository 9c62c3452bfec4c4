"""`fxctl serve` end to end on this machine with the emulator: the real CLI, real processes, real HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fx(tmp_path):
    env = {**os.environ, "FXCTL_SERVE_STATE": str(tmp_path / "state")}
    env.pop("FXCTL_INVENTORY", None)

    def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fxctl", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    yield run
    run("serve", "stop")  # never leave a server behind, whatever a test did


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


def group_members(pgid: int) -> list[str]:
    """Live processes of a process group (zombies waiting for this container's init to reap them excluded)."""
    rows = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout.splitlines()
    return [r for r in rows if r.split()[1] == str(pgid) and not r.split()[2].startswith("Z")]


def stream_completion(port: int, model: str) -> list[str]:
    body = json.dumps({"model": model, "prompt": "hello " * 40, "max_tokens": 8, "stream": True}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        events = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    return [json.loads(e)["choices"][0]["text"] for e in events if e != "[DONE]" and json.loads(e)["choices"]]


def test_dry_run_prints_both_tp4_instances_with_their_configs(fx):
    res = fx("serve", "start", "--profile", "mi308x-qwen3-coder-480b-tp4x2", "--l2-dir", "/mnt/kvtier/fxtier",
             "--dry-run")
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if not line.startswith("#") and line]
    assert len(lines) == 4                        # the host's LMCache server, two engines, the router
    assert "vllm_router.launch_router" in lines[3] and "--worker-urls http://127.0.0.1:8000 http://127.0.0.1:8001 " \
        "--policy consistent_hash" in lines[3]
    assert "lmcache.cli.main server" in lines[0] and "FxTierL2Adapter" in lines[0]
    assert "HIP_VISIBLE_DEVICES=0,1,2,3" in lines[1] and "--port 8000" in lines[1]
    assert "HIP_VISIBLE_DEVICES=4,5,6,7" in lines[2] and "--port 8001" in lines[2]
    assert "LMCacheMPConnector" in lines[1] and "# LMCache: multi-process mode" in res.stdout
    old = fx("serve", "start", "--profile", "mi308x-qwen3-coder-480b-tp4x2", "--l2-dir", "/mnt/kvtier/fxtier",
             "--lmcache-mode", "in-process", "--dry-run")
    assert "#   storage_plugins:" in old.stdout and "fxtier.l2_path: /mnt/kvtier/fxtier/main-1" in old.stdout
    assert "# LMCache: in-process" in old.stdout and "deprecated" in old.stdout
    as_json = json.loads(fx("-o", "json", "serve", "--profile", "mi308x-qwen3-coder-480b-tp8", "--l2-dir",
                            "/mnt/kvtier/fxtier", "--lmcache-mode", "in-process", "--dry-run").stdout)
    (only,) = as_json["instances"]
    assert only["argv"][:3] == [only["argv"][0], "serve", "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"]
    assert only["env"]["LMCACHE_CONFIG_FILE"] == only["config_path"]
    assert as_json["lmcache_mode"] == "in-process"


def test_start_status_logs_restart_stop_leave_nothing_behind(fx):
    port = free_port()
    res = fx("serve", "--engine", "sim", "--profile", "lab", "--local", "--port", str(port), "--time-scale", "0",
             "--name", "t1")
    assert res.returncode == 0, res.stderr + res.stdout
    assert "real tier store at" in res.stdout  # the emulator's real tier came up
    status = json.loads(fx("-o", "json", "serve", "status").stdout)["instances"]
    assert [(s["unit"], s["state"], s["port"], s["mode"]) for s in status] == [("fxctl-serve-t1-0", "ready", port,
                                                                               "process")]
    first_pid = status[0]["pid"]
    assert alive(first_pid)
    assert stream_completion(port, "fxctl-sim/lab-0.5b")  # streamed tokens arrive
    logs = fx("serve", "logs", "--name", "t1", "-n", "20")
    assert logs.returncode == 0 and f"listening on http://127.0.0.1:{port}" in logs.stdout

    again = fx("serve", "start", "--engine", "sim", "--profile", "lab", "--local", "--port", str(port), "--name", "t1")
    assert again.returncode == 1 and "already running" in again.stderr

    restarted = fx("serve", "restart", "--name", "t1")
    assert restarted.returncode == 0, restarted.stderr
    status = json.loads(fx("-o", "json", "serve", "status", "--name", "t1").stdout)["instances"]
    assert status[0]["state"] == "ready" and status[0]["pid"] != first_pid and not alive(first_pid)
    second_pid = status[0]["pid"]

    stopped = fx("-o", "json", "serve", "stop", "--name", "t1")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] == [{"host": "local", "unit": "fxctl-serve-t1-0",
                                                       "was_running": True, "stopped": True}]
    assert not alive(second_pid)
    assert not group_members(second_pid)  # nothing of its process group (session) is left
    status = json.loads(fx("-o", "json", "serve", "status").stdout)["instances"]
    assert status[0]["state"] == "stopped"


def test_an_engine_that_exits_at_once_is_reported_with_its_log(fx):
    res = fx("serve", "--engine", "sim", "--profile", "lab", "--local", "--name", "crash", "--port",
             str(free_port()), "--engine-command", "sh -c 'echo engine-boom >&2; exit 3'")
    assert res.returncode == 1
    assert "exited before it was ready" in res.stderr and "engine-boom" in res.stderr
    status = json.loads(fx("-o", "json", "serve", "status", "--name", "crash").stdout)["instances"]
    assert status[0]["state"] == "stopped"


def test_bad_values_and_misplaced_options_are_bad_input(fx):
    assert fx("serve", "start", "--profile", "lab", "--local", "--name", "Bad Name", "--dry-run").returncode == 2
    res = fx("serve", "--profile", "lab", "status")
    assert res.returncode == 2 and "after the subcommand" in res.stderr
    res = fx("serve", "start", "--profile", "no-such-profile", "--local", "--dry-run")
    assert res.returncode == 2 and "no such profile" in res.stderr


def test_a_busy_port_fails_pre_flight_and_stopping_an_unknown_deployment_says_so(fx, tmp_path):
    """Issue 18.8: a port another server answers on is found before launch; `stop --name` of a deployment
    that does not exist is an error that names it."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = fx("serve", "start", "--engine", "sim", "--profile", "lab", "--local", "--name", "busy",
                 "--port", str(port), "--l2-dir", str(tmp_path / "l2"))
    assert res.returncode == 1
    assert f"port(s) {port} already in use" in res.stderr and "Traceback" not in res.stderr
    gone = fx("serve", "stop", "--local", "--name", "nosuch")
    assert gone.returncode == 1 and "no deployment named 'nosuch'" in gone.stderr


def test_the_emulator_says_in_one_line_that_its_port_is_taken(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "fxctl", "sim", "serve", "--profile", "lab", "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
