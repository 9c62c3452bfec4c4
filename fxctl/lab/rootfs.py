"""The guest root filesystem: mmdebstrap minbase + the lab's packages, kernel modules and overlay,
packed as one lz4 cpio initramfs (`/init` -> systemd): guests run from RAM, clean at every boot."""

from __future__ import annotations

import shlex
import stat
import subprocess
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab.cpio import CpioWriter, tar_to_cpio
from fxctl.lab.guest_files import DISABLED_UNITS
from fxctl.lab.recipe import MIRROR, SUITE, KernelRelease

EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*",
                  "/usr/share/lintian/*", "/usr/share/zoneinfo/right/*")


def mmdebstrap_argv(packages, kernel: KernelRelease, modules_dir: Path, overlay: Path, out_tar: Path) -> list[str]:
    """The one mmdebstrap call that makes the rootfs tar; every customisation is a hook inside it."""
    root_modules = f"/lib/modules/{kernel.abi}"
    hooks = [
        f'mkdir -p "$1{root_modules}"',
        f"sync-in {shlex.quote(str(modules_dir))} {root_modules}",
        f'chroot "$1" depmod -a {shlex.quote(kernel.abi)}',
        f"sync-in {shlex.quote(str(overlay))} /",
        'rm -f "$1"/etc/ssh/ssh_host_* "$1"/etc/nvme/hostnqn "$1"/etc/nvme/hostid',
        'ln -sf /lib/systemd/systemd "$1/init"',
        ': > "$1/etc/machine-id"',
        # the host's resolver must not leak into guests that can reach nothing anyway
        'rm -f "$1/etc/resolv.conf" && echo "# fxctl lab: no DNS" > "$1/etc/resolv.conf"',
        # no logind in a lab guest: logins must not wait for it through pam_systemd
        'sed -i "/pam_systemd.so/d" "$1/etc/pam.d/common-session"',
        *(f'chroot "$1" systemctl disable {unit}' for unit in DISABLED_UNITS),
    ]
    argv = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(packages)]
    argv += [f"--dpkgopt=path-exclude={path}" for path in EXCLUDED_PATHS]
    argv += [f"--customize-hook={hook}" for hook in hooks]
    argv += [SUITE, str(out_tar), f"deb {MIRROR} {SUITE} main"]
    return argv


def run_mmdebstrap(argv: list[str], log_path: Path) -> None:
    with open(log_path, "w") as log:
        result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        tail = " / ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
        raise FxError(f"mmdebstrap failed: {tail}", f"full log: {log_path}")


def pack_initramfs(rootfs_tar: Path, out: Path) -> None:
    """tar -> newc cpio -> lz4 (legacy format, the one the kernel reads), with /dev/console present.

    lz4 over zstd: under TCG the kernel unpacks it in about half the time (5-7 s against 10-13 s for
    this rootfs), which is most of what a warm boot can still save.
    """
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as sink, subprocess.Popen(["lz4", "-l", "-q", "-c"], stdin=subprocess.PIPE,
                                                   stdout=sink) as proc:
        writer = CpioWriter(proc.stdin)
        tar_to_cpio(rootfs_tar, writer)
        if "dev/console" not in writer.names:
            writer.add("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
        writer.close()
        proc.stdin.close()
    if proc.returncode != 0:
        raise FxError("lz4 failed while packing the initramfs", "check free disk space in the cache folder")
    tmp.replace(out)
