"""One QEMU process per guest: its argv (pure), starting it daemonized, and stopping exactly it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab.guest_files import SEED_FW_CFG_NAME
from fxctl.lab.ports import LOOPBACK
from fxctl.lab.state import GuestRecord
from fxctl.poll import until

QEMU = "qemu-system-x86_64"
KERNEL_CMDLINE = "console=ttyS0 net.ifnames=0 quiet loglevel=3 panic=-1 mitigations=off"
MGMT_PCI_SLOT = 3
DRIVE_PCI_SLOT = 0x0C    # drives sit behind PCIe root ports 0x0c..0x1b (16 drives), so they can be hot-unplugged
QMP_SOCKET = "qmp.sock"  # the guest's QEMU control socket (QMP), in its folder: fxctl.lab.fault uses it


def drive_device_id(number: int) -> str:
    """QEMU's id of the guest's NVMe drive `number` (1-based), for device_del."""
    return f"nvme{number}"


def qmp_socket(folder: Path) -> Path:
    """The guest's control socket: in its folder, or (a unix socket path has at most 107 bytes) a name
    derived from the folder in the temporary directory when that path would be too long."""
    path = folder / QMP_SOCKET
    if len(os.fsencode(path)) <= 100:
        return path
    digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"fxctl-qmp-{digest}.sock"


def process_name(lab: str, guest: str) -> str:
    return f"fxctl-lab-{lab}-{guest}"


def qemu_argv(lab: str, guest: GuestRecord, *, vmlinux: str, initramfs: str, memory_mib: int,
              folder: Path) -> list[str]:
    """The full QEMU command line for one guest; `folder` holds its pidfile, seed and console log."""
    argv = [
        QEMU, "-name", process_name(lab, guest.name),
        "-machine", "q35", "-accel", "tcg,tb-size=256", "-cpu", "max", "-smp", "1",
        "-m", str(memory_mib), "-uuid", guest.uuid,
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", f"file:{folder / 'console.log'}",
        "-qmp", f"unix:{qmp_socket(folder)},server=on,wait=off",
        "-kernel", vmlinux, "-initrd", initramfs, "-append", KERNEL_CMDLINE,
        "-fw_cfg", f"name={SEED_FW_CFG_NAME},file={folder / 'seed.tar'}",
        "-device", "virtio-rng-pci",
        "-netdev", f"user,id=mgmt,restrict=on,hostfwd=tcp:{LOOPBACK}:{guest.ssh_port}-:22",
        "-device", f"virtio-net-pci,netdev=mgmt,mac={guest.mgmt_mac},addr={MGMT_PCI_SLOT:#x}",
    ]
    for slot, link in enumerate(guest.links, start=MGMT_PCI_SLOT + 1):
        server = "on" if link.server else "off"
        argv += ["-netdev", f"stream,id=link{link.index},server={server},addr.type=inet,"
                            f"addr.host={LOOPBACK},addr.port={link.port}",
                 "-device", f"virtio-net-pci,netdev=link{link.index},mac={link.mac},host_mtu=9000,"
                            f"addr={slot:#x}"]
    for number, drive in enumerate(guest.drives, start=1):
        slot = DRIVE_PCI_SLOT + number - 1
        argv += ["-device", f"pcie-root-port,id=rp{number},chassis={number},addr={slot:#x}",
                 "-drive", f"file={drive.path},if=none,id=nvm{number},format=raw,cache=unsafe",
                 "-device", f"nvme,id={drive_device_id(number)},serial={drive.serial},drive=nvm{number},"
                            f"bus=rp{number}"]
    argv += ["-daemonize", "-pidfile", str(folder / "qemu.pid")]
    return argv


def start_guest(argv: list[str], folder: Path) -> int:
    """Run QEMU daemonized; returns the pid it wrote. QEMU returns once the guest is set up."""
    pidfile = folder / "qemu.pid"
    pidfile.unlink(missing_ok=True)
    result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise FxError(f"QEMU failed to start {folder.name}: {result.stderr.strip()[-400:]}",
                      "check that the ports are free and the image exists ('fxctl lab build')")
    return int(pidfile.read_text().strip())


def is_guest_process(pid: int | None, lab: str, guest: str) -> bool:
    """True only when pid is a live QEMU whose command line names this lab's guest."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (bool(cmdline) and Path(cmdline[0].decode(errors="replace")).name == QEMU
            and process_name(lab, guest).encode() in cmdline)


def stop_guest(pid: int, lab: str, guest: str, *, grace_s: float = 5.0) -> bool:
    """SIGTERM then SIGKILL the guest's QEMU, after checking it is ours. False when nothing to stop."""
    if not is_guest_process(pid, lab, guest):
        return False
    os.kill(pid, signal.SIGTERM)
    if until(lambda: not is_guest_process(pid, lab, guest), grace_s, every_s=0.1):
        return True
    os.kill(pid, signal.SIGKILL)
    until(lambda: not is_guest_process(pid, lab, guest), 5.0, every_s=0.1)
    return True
