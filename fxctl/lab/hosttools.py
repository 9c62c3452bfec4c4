"""The host programs the lab needs, the Debian packages that provide them, and installing them."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from fxctl.errors import FxError

# program -> Debian package
BUILD_TOOLS = {
    "apt-get": "apt", "dpkg-deb": "dpkg", "mmdebstrap": "mmdebstrap", "lz4": "lz4",
    "ssh-keygen": "openssh-client",
}
RUN_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86", "ssh": "openssh-client", "ssh-keygen": "openssh-client",
}


@dataclass(frozen=True)
class MissingTools:
    programs: tuple[str, ...]
    packages: tuple[str, ...]

    def install_command(self) -> str:
        return "apt-get install -y " + " ".join(self.packages)


def find_missing(tools: dict[str, str]) -> MissingTools | None:
    programs = tuple(p for p in tools if shutil.which(p) is None)
    if not programs:
        return None
    packages = tuple(sorted({tools[p] for p in programs}))
    return MissingTools(programs, packages)


def can_install() -> bool:
    """Root on a Debian-family system: we may run apt-get ourselves when asked."""
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def require(tools: dict[str, str], *, install: bool, progress) -> None:
    """Fail naming every missing program and the apt-get line that provides them, or install them."""
    missing = find_missing(tools)
    if missing is None:
        return
    if install and can_install():
        progress(f"installing host packages: {' '.join(missing.packages)}")
        run_apt_install(missing.packages)
        missing = find_missing(tools)
        if missing is None:
            return
    hint = f"install them with: {missing.install_command()}"
    if can_install():
        hint += " (or pass --install-deps)"
    raise FxError(f"missing host programs: {', '.join(missing.programs)}", hint)


def run_apt_install(packages: tuple[str, ...]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise FxError(f"apt-get install {' '.join(packages)} failed: {' / '.join(tail)}",
                      "run 'apt-get update' first, then try again")


def run_apt_update() -> None:
    result = subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise FxError(f"apt-get update failed: {' / '.join(tail)}", "check the network and apt sources")
