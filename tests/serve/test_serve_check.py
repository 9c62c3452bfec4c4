"""`fxctl serve start --check` against a real sshd host (issue 32): it plans without touching the host (the
state and L2 folders are not created, nothing is uploaded, every command in its run journal only reads),
names what start would install, and exits 1 where start would refuse; start itself records its commands,
uploads included, in a run journal as provision does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fxctl.remote.journal import RunJournal
from tests.conftest import sim_serve_inventory

pytestmark = pytest.mark.sshd
REPO = Path(__file__).resolve().parents[2]
WRITES = ("put ", "write ", "mkdir", "rm ", "systemd-run", "mv ", "chmod")


def files(root: Path) -> set[str]:
    """Every path under root (the sshd host is this machine), the run journals' folder aside."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.relative_to(root).parts[0] == "runs"}


def journal_of(stderr: str) -> list[dict]:
    line = next(x for x in stderr.splitlines() if x.startswith("journal: "))
    return RunJournal(Path(line.removeprefix("journal: "))).entries()


def test_check_changes_nothing_and_start_journals_its_commands(ssh_world, tmp_path):
    state, l2 = tmp_path / "state", tmp_path / "l2"
    inventory = sim_serve_inventory(ssh_world, tmp_path / "inv.yaml", l2_dir=l2, state_dir=state, port=8197)
    env = {k: v for k, v in os.environ.items() if k != "FXCTL_INVENTORY"}
    before = files(tmp_path)

    def fxctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fxctl", "-i", str(inventory), *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    checked = fxctl("-o", "json", "serve", "start", "--check", "--name", "chk")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    data = json.loads(checked.stdout)
    assert data["check"] is True and data["would_fail"] == []
    checks = {c["check"]: c for c in data["hosts"]["host0"]["checks"]}
    assert checks["fxctl"]["status"] == "pending" and "start would upload and unpack" in checks["fxctl"]["detail"]
    assert [p["unit"] for p in data["instances"]] == ["fxctl-serve-chk-0"]
    assert not state.exists() and not l2.exists(), "start --check changed the host"
    commands = [e["command"] for e in RunJournal(Path(data["journal"])).entries()]
    assert commands and all(not c.startswith(WRITES) for c in commands), commands
    assert files(tmp_path) == before, "start --check wrote on the host"

    text = fxctl("serve", "start", "--check", "--name", "chk")   # the plan as a person reads it
    assert text.returncode == 0, text.stderr
    assert "# host0: instance 0 (fxctl-serve-chk-0), port 8197" in text.stdout
    assert "--check: nothing was changed on any host; start would go ahead; journal: " in text.stdout
    assert not state.exists()
    bad = fxctl("serve", "start", "--check", "--no-install", "--name", "chk")
    assert bad.returncode == 2 and "--check runs the pre-flight read only" in bad.stderr

    try:
        started = fxctl("-o", "json", "serve", "start", "--name", "chk", "--time-scale", "0")
        assert started.returncode == 0, started.stdout + started.stderr
        recorded = [e["command"] for e in journal_of(started.stderr)]
        assert any(c.startswith("put ") and c.endswith("fxctl-0.1.0-py3-none-any.whl") for c in recorded), recorded
        assert any("systemd-run" in c or "setsid" in c or "nohup" in c for c in recorded), recorded
        assert not (state / "wheelhouse").exists()   # unpacked, the staged wheels are removed
        # start would refuse now: the instance runs; --check says so and exits 1, the instance untouched
        again = fxctl("-o", "json", "serve", "start", "--check", "--name", "chk")
        assert again.returncode == 1, again.stdout + again.stderr
        answer = json.loads(again.stdout)
        assert answer["would_fail"] == ["host0"] and "already running" in answer["hosts"]["host0"]["error"]
        status = json.loads(fxctl("-o", "json", "serve", "status", "--name", "chk").stdout)["instances"]
        assert [s["state"] for s in status] == ["ready"], status
    finally:
        stopped = fxctl("serve", "stop", "--name", "chk")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
