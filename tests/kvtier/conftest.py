"""Fixtures of the KV tier tests: a directory on the real disk (O_DIRECT works there), a ramfs (no O_DIRECT),
a size-limited tmpfs, and a small loop-mounted ext4 filesystem that can be made to fail with EIO."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support.loopfs import LoopFs

# the tests import kvtier_helpers from this folder, whatever pytest's import mode
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))



@pytest.fixture
def disk_dir(tmp_path):
    """A fresh directory on this machine's disk (tmp_path lies on it; O_DIRECT works)."""
    path = tmp_path / "l2"
    path.mkdir()
    return str(path)


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture
def ramfs_dir(tmp_path):
    """A ramfs: no O_DIRECT at all (tmpfs accepts O_DIRECT since Linux 6.6)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a ramfs needs root")
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    if _run("mount", "-t", "ramfs", "ramfs", str(mnt)).returncode != 0:
        pytest.skip("cannot mount a ramfs here")
    yield str(mnt)
    _run("umount", "-l", str(mnt))


@pytest.fixture
def tmpfs_dir(tmp_path):
    """A tmpfs of 24 MiB: ENOSPC when full."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if _run("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield str(mnt)
    _run("umount", "-l", str(mnt))


@pytest.fixture
def loop_fs(tmp_path):
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("loop devices need root and losetup")
    fs = LoopFs(tmp_path, 48)
    yield fs
    fs.close()
