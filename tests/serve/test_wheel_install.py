"""fxctl installed from its wheel into a clean venv, outside the checkout, deploys itself (issue 27 #1).

As an ops team installs it: `pip wheel .`, `pip install fxctl-*.whl` into a fresh venv, then from another
directory `fxctl serve start` against an SSH host (a real sshd on 127.0.0.1, host key pinned) with the
emulator engine and the host's own python3, which has neither fxctl nor aiohttp: pre-flight packs the
installed fxctl into a wheel again (there is no source tree to build from), pushes it with its dependency
wheels, and the emulator starts; then `serve status` and `serve stop`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fxctl.serve.wheel import local_source_hash, pip_wheel, wheel_source_hash

pytestmark = pytest.mark.sshd
REPO = Path(__file__).resolve().parents[2]
HOST_PYTHON = "/usr/bin/python3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A clean venv with fxctl installed from a wheel built from this checkout; returns its bin folder."""
    root = tmp_path_factory.mktemp("wheel-install")
    dist = root / "dist"
    # from a clean copy of the checkout, as fxctl's own wheel builds are: an in-tree build reuses a build/ left
    # in the checkout, and a module moved since then would ship twice
    wheel = pip_wheel(REPO, dist)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           str(wheel)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return venv / "bin"


def test_an_installed_wheel_ships_itself_to_a_host_and_serves(installed, ssh_world, tmp_path):
    bin_dir = installed
    where = subprocess.run([str(bin_dir / "python"), "-c", "import fxctl; print(fxctl.__file__)"],
                           capture_output=True, text=True, cwd="/", check=True).stdout.strip()
    assert "site-packages" in where and not where.startswith(str(REPO)), where
    if not Path(HOST_PYTHON).exists():
        pytest.fail(f"{HOST_PYTHON} is missing: the host's own python runs the emulator")
    server = ssh_world["servers"][0]
    port = free_port()
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(json.dumps({
        "version": 1,
        "defaults": {"key": str(ssh_world["client_key"]), "known_hosts": str(ssh_world["known_hosts"])},
        "hosts": {"host0": {"address": "127.0.0.1", "port": server.port}},
        "serve": {"hosts": ["host0"], "engine": "sim", "profile": "lab", "port": port, "python": HOST_PYTHON,
                  "l2_dir": str(tmp_path / "l2"), "l2_size": "256MiB", "state_dir": str(tmp_path / "state")}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # a cache of its own: the wheel is packed from the installed files here, not found from a checkout's build;
    # pip keeps its usual cache (downloads of the dependency wheels)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FXCTL_INVENTORY", "VIRTUAL_ENV")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"),
               PATH=f"{bin_dir}:{env['PATH']}")

    def fxctl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "fxctl"), "-i", str(inventory), "-o", "json", *args], cwd=elsewhere,
                              env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    try:
        started = fxctl("serve", "start", "--name", "wheel", "--time-scale", "0")
        assert started.returncode == 0, started.stdout + started.stderr
        host = json.loads(started.stdout)["host0"]
        checks = {c["check"]: c for c in host["checks"]}
        assert checks["fxctl"]["status"] == "changed" and "unpacked fxctl-0.1.0-py3-none-any.whl" in \
            checks["fxctl"]["detail"], checks["fxctl"]
        # the wheel pre-flight pushed was packed from the installed distribution: same package as this checkout
        packed = list((tmp_path / "cache" / "fxctl" / "serve" / "wheels").glob("*/fxctl-*.whl"))
        assert len(packed) == 1 and wheel_source_hash(packed[0]) == local_source_hash()
        with zipfile.ZipFile(packed[0]) as zf:
            names = zf.namelist()
            assert "fxctl-0.1.0.dist-info/entry_points.txt" in names and "fxctl/data/profiles/lab.yaml" in names
            assert not any(n.endswith(("INSTALLER", "direct_url.json", ".pyc")) for n in names)

        status = fxctl("serve", "status", "--name", "wheel")
        assert status.returncode == 0, status.stdout + status.stderr
        instances = json.loads(status.stdout)["instances"]
        assert [(s["host"], s["state"]) for s in instances] == [("host0", "ready")], instances
    finally:
        stopped = fxctl("serve", "stop", "--name", "wheel")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    after = json.loads(fxctl("serve", "status", "--name", "wheel").stdout)["instances"]
    assert [s["state"] for s in after] == ["stopped"], after
