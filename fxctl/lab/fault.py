"""Real faults in a running lab, for rehearsing runbooks: a storage link cut for N seconds, a guest reboot,
a drive pulled out (hot-unplug), a filesystem filled up.

Link, reboot and unplug go through the guest's QEMU control socket (QMP, fxctl.lab.qmp); fill runs
fallocate over SSH. Every fault is bounded in time, and whatever it changes for a while (a link down, the
reboot action, a fill file) is put back in a `finally`, also on Ctrl-C or SIGTERM. Only unplug is
permanent (for this run of the lab), and it asks for consent: a RAID0 that loses a member loses the data
striped over it, with no copy anywhere (no redundancy), so the array cannot be restored with its data.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from fxctl.errors import BadInput, FxError
from fxctl.lab.access import guest_host, wait_until_answering
from fxctl.lab.qemu import drive_device_id, is_guest_process, qmp_socket
from fxctl.lab.qmp import QmpClient, QmpError, QmpRefused
from fxctl.lab.state import GuestRecord, LabState, guest_dir
from fxctl.remote.command import script
from fxctl.remote.session import open_session

Progress = Callable[[str], None]
Sleep = Callable[[float], None]
MAX_SECONDS = 3600.0
UNPLUG_TIMEOUT_S = 60.0      # the guest's PCIe hotplug driver waits 5 s before it lets go of a slot
REBOOT_TIMEOUT_S = 600.0     # a guest boots in about 30 s under TCG; far more while the host is busy
FILL_NAME = ".fxctl-fault-fill"
RAID0_LOSS = ("a RAID0 has no redundancy: the data striped over this drive is gone for good, so the array "
              "cannot be restored with its data (only `fxctl provision --wipe` makes a new, empty one)")
LAB_STATELESS = ("lab guests keep no state across a reboot (their root is in RAM); the drives keep their data. "
                 "Restore the target with `fxctl net apply` and `fxctl provision` (on real hosts, "
                 "fxctl-net.service and fxctl-nvmet.service restore it at boot from the persisted config)")


@dataclass
class FaultResult:
    fault: str              # link | reboot | unplug | fill
    guest: str
    subject: str            # the link's netdev, the drive's serial, the filled path, or the guest
    seconds: float          # how long the fault lasted (link down, reboot until SSH, unplug until released)
    restored: bool          # the temporary change was put back (a pulled drive never is)
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


def check_seconds(value: float, what: str = "--seconds") -> float:
    if not 0 < value <= MAX_SECONDS:
        raise BadInput(f"{what} must be more than 0 and at most {MAX_SECONDS:.0f}, not {value:g}")
    return value


def running_guest(state: LabState | None, lab_name: str, name: str) -> GuestRecord:
    """The guest `name` of a running lab; BadInput for an unknown lab or guest, FxError when it is stopped."""
    if state is None:
        raise BadInput(f"no lab named {lab_name}", "start one with 'fxctl lab up'")
    guest = state.guest(name)
    if guest is None:
        raise BadInput(f"lab {lab_name} has no guest {name!r}", f"guests: {', '.join(g.name for g in state.guests)}")
    if not is_guest_process(guest.pid, state.name, guest.name):
        raise FxError(f"{name} is not running", "start the lab with 'fxctl lab up'")
    return guest


def control(state: LabState, guest: GuestRecord, timeout_s: float = 10.0) -> QmpClient:
    return QmpClient(qmp_socket(guest_dir(state.name, guest.name)), timeout_s=timeout_s)


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while a fault is on, so that its `finally` puts things back."""
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait(seconds: float, what: str, progress: Progress, sleep: Sleep, clock: Callable[[], float]) -> None:
    end = clock() + seconds
    while (left := end - clock()) > 0:
        sleep(min(left, 10.0))
        if end - clock() > 0.5:
            progress(f"{what}: {end - clock():.0f} s left")


def cut_link(state: LabState, guest: GuestRecord, seconds: float, *, netdev: str | None = None,
             progress: Progress, sleep: Sleep = time.sleep, clock: Callable[[], float] = time.monotonic
             ) -> FaultResult:
    """Take the guest's private (storage) link down for `seconds`, then up again; up again also on
    Ctrl-C/SIGTERM or an error. Both ends see the carrier go; nothing is dropped by fxctl itself."""
    check_seconds(seconds)
    links = [link for link in guest.links if netdev in (None, link.netdev)]
    if not links:
        have = ", ".join(link.netdev for link in guest.links) or "none"
        which = f" {netdev!r}" if netdev else ""
        raise BadInput(f"{guest.name} has no private link{which}", f"its private links: {have}")
    link = links[0]
    qemu_name = f"link{link.index}"
    started = time.monotonic()
    with control(state, guest) as qmp, terminated_as_interrupt():
        progress(f"{guest.name}: {link.netdev} (to {link.peer}) DOWN for {seconds:g} s")
        qmp.execute("set_link", name=qemu_name, up=False)
        try:
            _wait(seconds, f"{guest.name} {link.netdev} down", progress, sleep, clock)
        finally:
            _link_up(state, guest, qmp, qemu_name, progress)
            progress(f"{guest.name}: {link.netdev} UP again after {time.monotonic() - started:.1f} s")
    return FaultResult("link", guest.name, link.netdev, round(time.monotonic() - started, 1), True,
                       details={"peer": link.peer, "address": link.address})


def _link_up(state: LabState, guest: GuestRecord, qmp: QmpClient, name: str, progress: Progress) -> None:
    """set_link up, on a fresh connection if the first one broke; a link left down is an error to shout."""
    try:
        qmp.execute("set_link", name=name, up=True)
        return
    except QmpError as first:
        progress(f"{guest.name}: putting {name} up failed ({first.message}); trying a new control connection")
    try:
        with control(state, guest) as again:
            again.execute("set_link", name=name, up=True)
    except QmpError as exc:
        raise FxError(f"{guest.name}: the link {name} may still be DOWN: {exc.message}",
                      f"put it up by hand: fxctl lab fault link --guest {guest.name} --seconds 0.1, "
                      "or restart the lab") from None


def reboot(state: LabState, guest: GuestRecord, *, timeout_s: float = REBOOT_TIMEOUT_S,
           progress: Progress) -> FaultResult:
    """Hard reset (as a power cycle) and wait until the guest answers SSH again (bounded by timeout_s).
    Lab guests run with QEMU's -no-reboot; the reboot action is 'reset' only for the duration."""
    check_seconds(timeout_s, "--timeout")
    started = time.monotonic()
    with control(state, guest) as qmp, terminated_as_interrupt():
        qmp.execute("set-action", reboot="reset")
        try:
            progress(f"{guest.name}: hard reset")
            qmp.execute("system_reset")
            time.sleep(2.0)  # let the reset land before probing SSH (the old sshd may still answer)
            wait_until_answering(replace(state, guests=[guest]), timeout_s=timeout_s, progress=progress,
                                 alive=lambda g: is_guest_process(g.pid, state.name, g.name))
        finally:
            with contextlib.suppress(QmpError):
                qmp.execute("set-action", reboot="shutdown")
    notes = [LAB_STATELESS] if guest.role == "target" else [
        "lab guests keep no state across a reboot (their root is in RAM): run `fxctl net apply` and "
        "`fxctl provision` to connect and mount again"]
    return FaultResult("reboot", guest.name, guest.name, round(time.monotonic() - started, 1), True, notes)


def unplug_drive(state: LabState, guest: GuestRecord, serial: str, *, yes: bool,
                 timeout_s: float = UNPLUG_TIMEOUT_S, progress: Progress) -> FaultResult:
    """Hot-unplug the guest's NVMe drive `serial` (or its number, 1 = the first) with QMP device_del, waiting
    until the guest released it.
    Permanent for this run of the lab (`fxctl lab down` + `up` brings fresh, empty drives)."""
    check_seconds(timeout_s, "--timeout")
    numbers = [n for n, d in enumerate(guest.drives, start=1) if serial in (d.serial, str(n))]
    if not numbers:
        raise BadInput(f"{guest.name} has no drive {serial!r}",
                       f"its drives: {', '.join(d.serial for d in guest.drives) or 'none'}")
    if not yes:
        raise BadInput(f"pulling {serial} out of {guest.name} is destructive: {RAID0_LOSS}",
                       "pass --yes to pull it anyway")
    device, serial = drive_device_id(numbers[0]), guest.drives[numbers[0] - 1].serial
    started = time.monotonic()
    with control(state, guest) as qmp:
        progress(f"{guest.name}: pulling drive {serial} (QEMU device {device})")
        try:
            qmp.execute("device_del", id=device)
        except QmpRefused as exc:
            if exc.error_class == "DeviceNotFound":
                raise FxError(f"{guest.name}: drive {serial} is already pulled (QEMU has no device {device})",
                              "fresh drives come with 'fxctl lab down' then 'fxctl lab up'") from None
            raise
        if qmp.wait_event("DEVICE_DELETED", timeout_s=timeout_s, match={"device": device}) is None:
            raise FxError(f"{guest.name}: asked to release drive {serial}, and it had not after {timeout_s:.0f} s",
                          "the guest's PCIe hotplug may be busy; the drive goes when the guest lets go")
    return FaultResult("unplug", guest.name, serial, round(time.monotonic() - started, 1), False, [RAID0_LOSS])


# Fill in steps: fallocate of the whole free figure fails on XFS (ENOSPC: the allocation also needs
# metadata blocks, and stripe alignment over md RAID0 wastes some), so grow the file by what df says is
# free, halving the step at each ENOSPC, down to one 4 KiB block. Then a 1 MiB write with fsync probes
# that the filesystem is full for writers (refused) or not (accepted: only with --leave of 1 MiB or more).
_FILL = r"""
dir=$1; leave=$2; name=$3
mountpoint -q "$dir" || { echo "$dir is not a mount point" >&2; exit 3; }
free() { df --output=avail -B1 "$dir" | tail -n 1 | tr -d ' '; }
f="$dir/$name"; step=$(( $(free) - leave ))
[ "$step" -gt 0 ] || { echo "nothing to fill: $(free) bytes free" >&2; exit 4; }
: > "$f" || exit 5
off=0; tries=0
while [ "$step" -ge 4096 ] && [ "$tries" -lt 400 ]; do
  tries=$((tries + 1))
  want=$(( $(free) - leave )); [ "$want" -ge 4096 ] || break
  [ "$step" -le "$want" ] || step=$want
  step=$(( step / 4096 * 4096 ))
  if fallocate -o "$off" -l "$step" "$f" 2>/dev/null; then off=$((off + step)); else step=$((step / 2)); fi
done
probe=refused
dd if=/dev/zero of="$f.probe" bs=64k count=16 conv=fsync status=none 2>/dev/null && probe=accepted
rm -f "$f.probe"
echo "$(df --output=size,used,avail -B1 "$dir" | tail -n 1) $off $tries $probe"
"""


def fill_filesystem(state: LabState, guest: GuestRecord, path: str, *, hold_s: float, leave: int,
                    progress: Progress, sleep: Sleep = time.sleep) -> FaultResult:
    """Fill the filesystem mounted at `path` (fallocate) up to `leave` bytes free, hold it for hold_s, then
    remove the fill file (also on Ctrl-C/SIGTERM or an error)."""
    check_seconds(hold_s, "--seconds")
    if not path.startswith("/") or "\n" in path:
        raise BadInput(f"--path must be an absolute path, not {path!r}")
    if leave < 0:
        raise BadInput(f"--leave must be 0 or more bytes, not {leave}")
    fill = f"{path.rstrip('/')}/{FILL_NAME}"
    started = time.monotonic()
    with open_session(guest_host(state, guest)) as session, terminated_as_interrupt():
        try:
            result = session.run(script(_FILL, path, str(leave), FILL_NAME), timeout=300)
            if not result.ok:
                raise FxError(f"{guest.name}: could not fill {path}: "
                              f"{(result.stderr or result.stdout).strip()[-300:]}")
            size, used, avail, filled, tries, probe = parse_fill(result.stdout)
            progress(f"{guest.name}: {path} filled with {filled} bytes in {tries} fallocate calls ({avail} "
                     f"bytes free of {size}, a 1 MiB write {probe}); holding {hold_s:g} s")
            _wait(hold_s, f"{guest.name} {path} full", progress, sleep, time.monotonic)
        finally:
            removed = session.run(script('rm -f "$1" "$1.probe"', fill), timeout=60)
            if not removed.ok:
                raise FxError(f"{guest.name}: could not remove {fill}: {removed.stderr.strip()[-300:]}",
                              f"remove it by hand: fxctl lab ssh {guest.name} rm -f {fill}")
            progress(f"{guest.name}: {fill} removed")
    return FaultResult("fill", guest.name, path, round(time.monotonic() - started, 1), True,
                       details={"size_bytes": size, "used_bytes": used, "free_bytes": avail, "filled_bytes": filled,
                                "fallocate_calls": tries, "write_probe": probe})


def parse_fill(stdout: str) -> tuple[int, int, int, int, int, str]:
    """The fill script's last line: size, used, free (df, bytes), bytes filled, fallocate calls, and whether
    the 1 MiB probe write was "refused" or "accepted"."""
    words = stdout.split()
    if len(words) != 6 or words[5] not in ("refused", "accepted") or not all(w.isdigit() for w in words[:5]):
        raise FxError(f"the fill script answered {stdout.strip()[-200:]!r}, not its summary line")
    size, used, avail, filled, tries = (int(w) for w in words[:5])
    return size, used, avail, filled, tries, words[5]
