"""Shared fixtures: real OpenSSH servers on 127.0.0.1 ("hosts") with generated keys."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from fxctl.inventory.model import Host
from tests.support.sshd import SUDO_USER, keygen, start_sshd, sudo_user_ready
from tests.support.strict_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 (hooks)
from tests.support.xdist_lab import pytest_xdist_make_scheduler  # noqa: F401 (hook)


@pytest.fixture(scope="session")
def ssh_world(tmp_path_factory):
    """Four sshd 'hosts' sharing one client key; known_hosts lists them all."""
    # a world-readable folder: sshd reads authorized_keys with the privileges of the user logging in
    folder = Path(tempfile.mkdtemp(prefix="fxctl-sshd-"))
    folder.chmod(0o755)
    client_key = keygen(folder / "client_key")
    servers = [start_sshd(folder / f"host{i}", f"host{i}", client_key.with_suffix(".pub")) for i in range(4)]
    known_hosts = folder / "known_hosts"
    known_hosts.write_text("".join(s.known_hosts_line() for s in servers))
    yield {"folder": folder, "client_key": client_key, "servers": servers, "known_hosts": known_hosts}
    for server in servers:
        server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def host_for(world, index: int = 0, **overrides) -> Host:
    server = world["servers"][index]
    fields = dict(name=server.name, address="127.0.0.1", port=server.port, user="root",
                  key=str(world["client_key"]), known_hosts=str(world["known_hosts"]), connect_timeout=5)
    fields.update(overrides)
    return Host(**fields)


@pytest.fixture
def sudo_user():
    if not sudo_user_ready():
        if os.environ.get("CI"):
            pytest.fail(f"CI must create user {SUDO_USER} with NOPASSWD sudo (.ci/run does)")
        pytest.skip(f"user {SUDO_USER} with NOPASSWD sudo not set up (run .ci/setup-test-user)")
    return SUDO_USER


@pytest.fixture(autouse=True)
def _isolated_run_dir(tmp_path, monkeypatch):
    """Run journals of tests go to the test's temporary folder, never the user's state dir."""
    monkeypatch.setenv("FXCTL_RUN_DIR", str(tmp_path / "runs"))
    yield


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def sim_serve_inventory(world, path: Path, *, l2_dir: Path, state_dir: Path, **serve) -> Path:
    """An inventory at `path`: sshd host0 of `world` serving the emulator with the host's own python3."""
    path.write_text(json.dumps({
        "version": 1,
        "defaults": {"key": str(world["client_key"]), "known_hosts": str(world["known_hosts"])},
        "hosts": {"host0": {"address": "127.0.0.1", "port": world["servers"][0].port}},
        "serve": {"hosts": ["host0"], "engine": "sim", "profile": "lab", "python": "/usr/bin/python3",
                  "l2_dir": str(l2_dir), "l2_size": "256MiB", "state_dir": str(state_dir), **serve}}))
    return path
