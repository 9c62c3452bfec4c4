"""`fxctl serve --engine sim` on a lab guest, through the real CLI: fxctl and its dependency wheels pushed to
a guest without pip or network, the emulator as a systemd transient unit with its real tier on the
provisioned XFS mount, an OpenAI client streaming through an SSH port forward, status, logs, restart, and
stop leaving no process behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from fxctl.remote.command import script, sh
from tests.ctrl_c import sigint_as_in_a_terminal
from tests.lab.conftest import REPO, fxctl, lab_inventory

pytestmark = pytest.mark.lab
PORT = 8177
NAME = "labtest"
START_TIMEOUT = 900


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "lab.yaml"
    data = lab_inventory(lab)
    data["serve"] = {"hosts": ["initiator1"], "profile": "lab", "engine": "sim", "port": PORT,
                     "l2_size": "512MiB", "l2_dir": "/mnt/kvtier/fxtier"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    initiator = lab.guests("initiator")[0]
    if not lab.run(initiator, sh("findmnt", "/mnt/kvtier")).ok:  # a fresh lab: build the array first
        done = fxctl("-i", str(path), "provision", timeout=900)
        assert done.returncode == 0, done.stderr + done.stdout
    yield path
    fxctl("-i", str(path), "serve", "stop", "--name", NAME, timeout=120)
    lab.run(initiator, sh("rm", "-rf", f"/mnt/kvtier/fxtier/{NAME}-0"))   # the array's later users start clean


def test_serve_sim_on_the_initiator_streams_through_a_forward_and_stops_clean(lab, inventory):
    openai = pytest.importorskip("openai")
    inv = str(inventory)
    started = fxctl("-i", inv, "serve", "start", "--name", NAME, "--time-scale", "0.01", timeout=START_TIMEOUT)
    assert started.returncode == 0, started.stderr + started.stdout
    assert "systemd" in started.stdout and "real tier store at /mnt/kvtier/fxtier/labtest-0" in started.stdout
    assert "/dev/md" in started.stdout  # pre-flight saw the md array under the L2 directory

    status = json.loads(fxctl("-i", inv, "-o", "json", "serve", "status", "--name", NAME).stdout)["instances"]
    assert [(s["host"], s["unit"], s["state"], s["mode"]) for s in status] == [
        ("initiator1", f"fxctl-serve-{NAME}-0", "ready", "systemd")]

    # `fxctl serve forward`, as a user runs it: a local port to the guest's 127.0.0.1:PORT over SSH
    forward = subprocess.Popen([sys.executable, "-m", "fxctl", "-i", inv, "-o", "json", "serve", "forward",
                                "--host", "initiator1", "--name", NAME, "--local-port", "0"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                               preexec_fn=sigint_as_in_a_terminal)
    try:
        printed = ""
        deadline = time.monotonic() + 60
        while not printed.rstrip().endswith("}") and time.monotonic() < deadline:
            printed += forward.stdout.readline()
        local = json.loads(printed)["local"]
        client = openai.OpenAI(base_url=f"{local}/v1", api_key="none")
        pieces = [c.choices[0].text for c in client.completions.create(
            model="fxctl-sim/lab-0.5b", prompt="fxctl " * 300, max_tokens=12, stream=True) if c.choices]
        assert len([p for p in pieces if p]) >= 2, pieces  # tokens arrived as a stream
    finally:
        forward.send_signal(signal.SIGINT)
        try:
            forward.wait(timeout=30)
        except subprocess.TimeoutExpired:
            forward.kill()
            _, err = forward.communicate(timeout=10)
            pytest.fail(f"`serve forward` did not stop within 30 s of Ctrl-C; it printed {printed!r}, stderr:\n{err}")
    assert forward.returncode == 130, forward.stderr.read()

    initiator = lab.guests("initiator")[0]
    logs = fxctl("-i", inv, "serve", "logs", "--name", NAME)
    assert logs.returncode == 0 and f"listening on http://127.0.0.1:{PORT}" in logs.stdout
    restarted = fxctl("-i", inv, "serve", "restart", "--name", NAME, timeout=START_TIMEOUT)
    assert restarted.returncode == 0, restarted.stderr + restarted.stdout

    stopped = fxctl("-i", inv, "-o", "json", "serve", "stop", "--name", NAME, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"][0]["was_running"] is True
    left = lab.run(initiator, script(f'ps -eo pid=,args= | grep -F -- "--port {PORT}" | grep -v grep; '
                                     f'systemctl is-active fxctl-serve-{NAME}-0; true'))
    assert "sim serve" not in left.stdout and left.stdout.strip().splitlines()[-1] in ("inactive", "unknown")
    status = json.loads(fxctl("-i", inv, "-o", "json", "serve", "status", "--name", NAME).stdout)["instances"]
    assert status[0]["state"] == "stopped"


def test_vllm_preflight_on_a_guest_without_vllm_or_gpus_names_host_check_and_fix(inventory):
    res = fxctl("-i", str(inventory), "serve", "start", "--engine", "vllm", "--profile", "h200-70b", "--name",
                "vtest", "--l1-size", "1GiB", timeout=300)
    assert res.returncode == 1
    for line in ("initiator1: python:vllm: python3: vllm not installed, known good 0.33.0",
                 "fix: python3 -m pip install vllm==0.33.0",
                 "initiator1: python:lmcache: python3: lmcache not installed, known good 0.5.6",
                 "initiator1: gpus: `nvidia-smi -L` failed"):
        assert line in res.stderr, res.stderr
    assert "initiator1: mount" not in res.stderr  # the L2 directory is on the provisioned md array
    status = fxctl("-i", str(inventory), "-o", "json", "serve", "status", "--name", "vtest")
    assert json.loads(status.stdout)["instances"] == []  # nothing was launched
