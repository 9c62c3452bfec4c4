"""The QEMU lab for end-to-end tests: one lab for the tests of this package, booted once.

Set FXCTL_LAB_NAME to reuse a lab you keep running (`fxctl lab up --name NAME --paths 2`): the tests use it and
leave it running. Otherwise the first lab test starts its own lab (named pytest<pid>), building the image
first if the cache has none (about 1-2 minutes), and the lab stops and is removed as soon as the last test
of this package is done (a package-scoped fixture), not at the end of the session: the guests' QEMU
processes use CPU, and the vLLM tests that run after the lab's would otherwise share the 2 cores with them.
Lab tests skip only when QEMU is not installed (.ci/setup installs it; under CI a skip fails the run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from fxctl.lab.access import guest_host
from fxctl.lab.lab import is_running
from fxctl.lab.state import GuestRecord, LabState
from fxctl.remote.command import Command
from fxctl.remote.session import RunResult, open_session

REPO = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 1200


def fxctl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real CLI (`python -m fxctl ...`) from the repository root."""
    return subprocess.run([sys.executable, "-m", "fxctl", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


# the lab runs with two private links (its multipath drills, test_multipath_lab); the other modules provision
# the array over the first link only, as a one-path lab would
LAB_PATHS = "2"


def lab_inventory(lab, paths: int = 1) -> dict:
    """`fxctl lab inventory` as data; with paths=1 each array keeps its first path only (a `listen:`)."""
    result = fxctl("lab", "inventory", "--name", lab.name)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    if paths == 1:
        for array in data["arrays"]:
            if "paths" in array:
                array["listen"] = {"address": array.pop("paths")[0]["address"]}
    return data


def pytest_configure(config):
    config.addinivalue_line("markers", "lab_stops: stops the lab, so it runs after every other lab test")


# the module that destroys and re-creates the array (teardown, TCP, a drive with a filesystem) runs after the
# ones that use the array the fault drills provisioned: test_serve_lab serves on it instead of provisioning
# its own (about 2 minutes of the suite)
REBUILDS_THE_ARRAY = "test_provision_lab.py"


def pytest_collection_modifyitems(session, config, items):
    """Tests marked lab_stops go after every other test of this package, and still inside it (the lab is
    package-scoped: a lab_stops test moved past the package would boot a second lab); before them, the
    module that rebuilds the array goes after the others. Other order kept (under pytest-xdist, one worker runs
    them all in this order: tests/support/xdist_lab.py)."""
    here = Path(__file__).parent
    inside = [i for i, item in enumerate(items) if here in Path(str(item.fspath)).parents]
    if not inside:
        return
    block = items[inside[0]:inside[-1] + 1]          # pytest collects a package's tests contiguously
    block.sort(key=lambda item: (item.get_closest_marker("lab_stops") is not None,
                                 Path(str(item.fspath)).name == REBUILDS_THE_ARRAY))
    items[inside[0]:inside[-1] + 1] = block


@dataclass
class Lab:
    name: str
    started_here: bool

    @property
    def state(self) -> LabState:
        state = LabState.load(self.name)
        assert state is not None, f"lab {self.name} has no state"
        return state

    def guests(self, role: str | None = None) -> list[GuestRecord]:
        return [g for g in self.state.guests if role is None or g.role == role]

    def run(self, guest: GuestRecord, command: Command, timeout: float = 60) -> RunResult:
        """Run a command on a guest through fxctl's remote layer, host key pinned."""
        with open_session(guest_host(self.state, guest)) as session:
            return session.run(command, timeout=timeout)


@pytest.fixture(scope="package")
def lab():
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86; .ci/setup does)")
    reuse = os.environ.get("FXCTL_LAB_NAME")
    name = reuse or f"pytest{os.getpid()}"
    started_here = not is_running(LabState.load(name))
    if started_here:
        result = fxctl("lab", "up", "--name", name, "--paths", LAB_PATHS, timeout=UP_TIMEOUT_S)
        assert result.returncode == 0, f"fxctl lab up failed:\n{result.stderr}\n{result.stdout}"
        sys.stderr.write(result.stderr)
    handle = Lab(name, started_here)
    yield handle
    if started_here:
        fxctl("lab", "down", "--name", name, "--purge")
