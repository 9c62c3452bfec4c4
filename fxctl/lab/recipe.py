"""What a lab image is made of, and the key that names it in the cache.

The key hashes the package list, the resolved kernel (package and version: linux-image-amd64 drifts
from ABI to ABI) and the text of the build code itself, so any change to how the image is made
builds a new one instead of reusing a stale one.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fxctl.errors import FxError

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
KERNEL_METAPACKAGE = "linux-image-amd64"

ROOTFS_PACKAGES = (
    "systemd-sysv", "udev", "openssh-server", "nvme-cli", "mdadm", "xfsprogs", "rdma-core",
    "ibverbs-utils", "ibverbs-providers", "rdmacm-utils", "python3", "python3-pyverbs", "iproute2",
    "kmod", "fio", "procps", "e2fsprogs", "util-linux", "dbus", "iputils-ping",
    # `fxctl net bench` (ib_write_bw)
    "perftest",
    # a serving host for `fxctl serve --engine sim`: the guests have no network, so fxctl's wheel is
    # installed with --no-deps over these
    "python3-pip", "python3-aiohttp", "python3-yaml", "python3-click", "python3-tabulate",
    "python3-fabric", "python3-xxhash",
)

# the modules whose text decides what the image holds
BUILD_SOURCES = ("recipe.py", "kernel.py", "rootfs.py", "cpio.py", "guest_files.py")

_DEPENDS = re.compile(r"^Depends:\s*(linux-image-[0-9][^\s,(]*)\s*\(=\s*([^)\s]+)\)", re.M)


@dataclass(frozen=True)
class KernelRelease:
    package: str        # linux-image-6.1.0-57-amd64
    version: str        # 6.1.192-3 (Debian package version)

    @property
    def abi(self) -> str:
        """The module directory name, e.g. 6.1.0-57-amd64."""
        return self.package.removeprefix("linux-image-")


@dataclass(frozen=True)
class Recipe:
    packages: tuple[str, ...]
    kernel: KernelRelease
    build_code_sha256: str

    def key(self) -> str:
        return recipe_key(self.packages, self.kernel, self.build_code_sha256)


def recipe_key(packages, kernel: KernelRelease, build_code_sha256: str) -> str:
    doc = json.dumps({"suite": SUITE, "packages": sorted(packages), "kernel": [kernel.package, kernel.version],
                      "build": build_code_sha256}, sort_keys=True)
    return f"{SUITE}-{kernel.abi}-{hashlib.sha256(doc.encode()).hexdigest()[:16]}"


def build_code_digest(folder: Path | None = None) -> str:
    folder = folder or Path(__file__).parent
    digest = hashlib.sha256()
    for name in BUILD_SOURCES:
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return digest.hexdigest()


def parse_kernel_depends(apt_cache_show: str) -> KernelRelease:
    """The kernel package the metapackage's candidate depends on, from `apt-cache show` text."""
    match = _DEPENDS.search(apt_cache_show)
    if not match:
        raise FxError(f"cannot resolve the kernel behind {KERNEL_METAPACKAGE}",
                      "run 'apt-get update' (the lab needs Debian 12 bookworm package lists)")
    return KernelRelease(package=match.group(1), version=match.group(2))


def resolve_kernel() -> KernelRelease:
    result = subprocess.run(["apt-cache", "show", "--no-all-versions", KERNEL_METAPACKAGE],
                            capture_output=True, text=True)
    return parse_kernel_depends(result.stdout)


def current_recipe() -> Recipe:
    return Recipe(packages=ROOTFS_PACKAGES, kernel=resolve_kernel(), build_code_sha256=build_code_digest())
