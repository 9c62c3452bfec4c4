"""Fixtures of the KV tier tests: a directory on the real disk (O_DIRECT works there), a ramfs (no O_DIRECT),
a size-limited tmpfs, and a small loop-mounted ext4 filesystem that can be made to fail with EIO."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

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


class LoopFs:
    """An ext4 image of `size_mb` on a loop device, mounted; `break_device()` makes all I/O fail with EIO
    (the image is cut short and the loop device told its new size: the blocks behind are gone)."""

    def __init__(self, root, size_mb: int):
        self.image = str(root / f"fs-{uuid.uuid4().hex[:8]}.img")
        self.mountpoint = str(root / "mnt")
        os.makedirs(self.mountpoint)
        with open(self.image, "wb") as f:
            f.truncate(size_mb << 20)
        if _run("mkfs.ext4", "-q", "-F", self.image).returncode != 0:
            pytest.skip("mkfs.ext4 not available")
        loop = _run("losetup", "-f", "--show", self.image)
        if loop.returncode != 0:
            pytest.skip(f"no loop device: {loop.stderr.strip()}")
        self.device = loop.stdout.strip()
        if _run("mount", self.device, self.mountpoint).returncode != 0:
            _run("losetup", "-d", self.device)
            pytest.skip("cannot mount a loop device here")
        self.path = os.path.join(self.mountpoint, "l2")
        os.makedirs(self.path)

    def break_device(self) -> None:
        os.truncate(self.image, 1 << 20)
        assert _run("losetup", "-c", self.device).returncode == 0

    def close(self) -> None:
        if _run("umount", self.mountpoint).returncode != 0:
            _run("umount", "-l", self.mountpoint)
        _run("losetup", "-d", self.device)
        os.unlink(self.image)


@pytest.fixture
def loop_fs(tmp_path):
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("loop devices need root and losetup")
    fs = LoopFs(tmp_path, 48)
    yield fs
    fs.close()
