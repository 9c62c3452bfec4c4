"""A small ext4 filesystem on a loop device, mounted (root and losetup needed), that a test can make fail:
`break_device()` (every I/O fails with EIO) or `shut_down()` (the filesystem refuses every write and read,
as XFS does when its device fails: the ext4/XFS shutdown ioctl through xfs_io)."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


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

    def shut_down(self) -> None:
        done = _run("xfs_io", "-x", "-c", "shutdown", self.mountpoint)
        assert done.returncode == 0, f"xfs_io shutdown failed: {done.stderr}"
