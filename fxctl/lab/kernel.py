"""The guest kernel: Debian's linux-image package unpacked (never installed), vmlinux for PVH boot,
and a module tree trimmed of what no lab guest loads."""

from __future__ import annotations

import lzma
import os
import shutil
import subprocess
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab.recipe import SUITE, KernelRelease

XZ_MAGIC = b"\xfd7zXZ\x00"

# Module trimming (~390 MB -> ~55 MB): under drivers/ and fs/ keep only what a lab guest loads
# (virtio, NVMe and NVMe-oF, md, RDMA, XFS/ext4, configfs, fw_cfg ...); elsewhere drop the big unused trees.
KEPT_DRIVERS = ("nvme", "md", "infiniband", "net", "virtio", "block", "char", "firmware", "crypto",
                "base", "dma", "pci", "acpi", "dax", "nvdimm")
KEPT_FILESYSTEMS = ("xfs", "ext4", "jbd2", "mbcache.ko", "configfs", "fuse", "overlayfs", "9p", "nls")
DROPPED_TREES = ("sound", "net/wireless", "net/mac80211", "net/bluetooth", "net/nfc",
                 "drivers/infiniband/hw", "drivers/net/wireless", "drivers/net/ethernet", "drivers/net/can",
                 "drivers/net/usb", "drivers/net/wwan", "drivers/net/ieee802154")


def check_host_suite(os_release: str | None = None) -> None:
    """The kernel comes through the host's apt: it must be a Debian bookworm host (or container)."""
    text = os_release if os_release is not None else _read_os_release()
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    codename = fields.get("VERSION_CODENAME", "").strip('"')
    if codename != SUITE:
        raise FxError(f"the lab image is built from Debian {SUITE} packages, but this host is "
                      f"{codename or 'not Debian'}",
                      f"run 'fxctl lab build' on a Debian 12 ({SUITE}) machine or container")


def _read_os_release() -> str:
    try:
        return Path("/etc/os-release").read_text()
    except OSError:
        return ""


def download_kernel(kernel: KernelRelease, scratch: Path) -> Path:
    """`apt-get download` the kernel package into scratch and `dpkg -x` it; returns the unpacked root."""
    scratch.mkdir(parents=True, exist_ok=True)
    cmd = ["apt-get", "download", "-q", f"{kernel.package}={kernel.version}"]
    if os.geteuid() == 0:
        cmd[1:1] = ["-o", "APT::Sandbox::User=root"]
    _run(cmd, cwd=scratch, what=f"apt-get download {kernel.package}")
    debs = sorted(scratch.glob(f"{kernel.package}_*.deb"))
    if not debs:
        raise FxError(f"apt-get download left no {kernel.package} package", "run 'apt-get update'")
    root = scratch / "kernel"
    _run(["dpkg-deb", "-x", str(debs[0]), str(root)], cwd=scratch, what="dpkg -x")
    return root


def vmlinux_from_bzimage(bzimage: bytes) -> bytes:
    """The uncompressed ELF kernel inside a bzImage (xz payload), bootable through QEMU's PVH entry."""
    start = bzimage.find(XZ_MAGIC)
    while start != -1:
        try:
            data = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bzimage[start:])
        except lzma.LZMAError:
            data = b""
        if data.startswith(b"\x7fELF"):
            return data
        start = bzimage.find(XZ_MAGIC, start + 1)
    raise FxError("no xz-compressed ELF kernel found in the bzImage",
                  "the Debian kernel's compression changed; the lab expects CONFIG_KERNEL_XZ")


def trimmed_paths(kernel_dir: Path) -> list[Path]:
    """What trim_modules removes under lib/modules/<abi>/kernel."""
    doomed = [kernel_dir / rel for rel in DROPPED_TREES]
    for folder, kept in (("drivers", KEPT_DRIVERS), ("fs", KEPT_FILESYSTEMS)):
        if (kernel_dir / folder).is_dir():
            doomed += [p for p in (kernel_dir / folder).iterdir() if p.name not in kept]
    return [p for p in doomed if p.exists()]


def trim_modules(modules_dir: Path) -> None:
    """Remove the module trees no lab guest loads from lib/modules/<abi>."""
    for path in trimmed_paths(modules_dir / "kernel"):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def _run(cmd: list[str], *, cwd: Path, what: str) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = " / ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise FxError(f"{what} failed: {tail}", "check the apt sources and network, then 'fxctl lab build --force'")
