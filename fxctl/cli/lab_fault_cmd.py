"""`fxctl lab fault`: inject real faults into a running lab (library: fxctl.lab.fault, fxctl.lab.drill_data)."""

from __future__ import annotations

import click

from fxctl.cli.lab_options import name_option
from fxctl.output import emit

SECONDS = click.FloatRange(min=0, min_open=True, max=3600)
DATA_HELP = ("GUEST:/DIR: before the fault, write --data-mib MiB of random data there and take its sha256; "
             "read it sequentially during the fault; afterwards report the read's error and whether the sha256 "
             "still matches (DIR must be a mount point, e.g. initiator1:/mnt/kvtier).")


def progress(message: str) -> None:
    click.echo(f"fault: {message}", err=True)


def _common(func):
    func = click.option("--guest", required=True, help="The lab guest to hit (see 'fxctl lab status').")(func)
    return name_option(func)


def _data_options(func):
    func = click.option("--data", "data_at", metavar="GUEST:/DIR", help=DATA_HELP)(func)
    func = click.option("--data-mib", default=32, show_default=True, type=click.IntRange(1, 4096),
                        help="MiB of data --data writes.")(func)
    return click.option("--read-timeout", type=SECONDS, metavar="SECONDS",
                        help="Longest one read of --data may take [default: the fault's length + 240 s].")(func)


@click.group("fault")
def command():
    """Inject real faults into a running lab, to rehearse runbooks.

    \b
    link    take a guest's storage link down for N seconds, then up again
    reboot  hard-reset a guest and wait until it answers SSH again
    unplug  pull an NVMe drive out of a target (hot-unplug; destructive for RAID0)
    fill    fill a mounted filesystem for N seconds, then free it again
    write   write a drill's data and record its sha256 (for a fault of your own)
    check   read the last drill's --data again and compare its sha256
    Every fault is bounded in time and what it changes for a while is put back, also on Ctrl-C.
    The guests' QEMU must have a control socket (any lab started by this fxctl has one).
    Exit 0 when the fault was injected (and undone); the data check is a measurement in the output.
    """


@command.command("link")
@_common
@click.option("--seconds", required=True, type=SECONDS, help="How long the link stays down (0 < S <= 3600).")
@click.option("--netdev", help="Which private link (eth1, ...) [default: the guest's first].")
@_data_options
@click.pass_obj
def link_cmd(app, lab_name, guest, seconds, netdev, data_at, data_mib, read_timeout):
    """Cut a guest's storage link (QMP set_link) for --seconds, then restore it.

    While the initiator's kernel keeps reconnecting, I/O waits (fast_io_fail_tmo -1) and resumes
    when the link is back. It gives up after ctrl_loss_tmo / reconnect_delay failed attempts, each
    reconnect_delay plus the failed connect: with the lab's 60 s / 2 s about 160 s after the cut (a 100 s
    cut was survived). Then it removes the controller, the RAID0 loses its members (array 'broken', I/O
    errors), and `fxctl provision` reconnects and assembles it again once the path is back (writes that
    failed are lost; what was written before stays).
    """
    from fxctl.lab import fault

    state, target = _guest(lab_name, guest)
    limit = read_timeout or seconds + 240
    result, data = _around(state, data_at, data_mib, limit, lambda: fault.cut_link(
        state, target, seconds, netdev=netdev, progress=progress))
    _emit(app, result, data)


@command.command("reboot")
@_common
@click.option("--timeout", "timeout_s", default=600, show_default=True, type=SECONDS,
              help="Most seconds to wait for SSH after the reset.")
@_data_options
@click.pass_obj
def reboot_cmd(app, lab_name, guest, timeout_s, data_at, data_mib, read_timeout):
    """Hard-reset a guest (QMP system_reset) and wait until it answers SSH again.

    Lab guests keep no state across a reboot (root in RAM), the drives keep their data: restore a
    target with `fxctl net apply` and `fxctl provision` (real hosts do it at boot from the persisted config).
    With --data on a target, the read waits until the initiator's kernel gives up (its path comes back
    only with that restore): `fxctl lab fault write` before, `check` after the restore, is quicker.
    """
    from fxctl.lab import fault

    state, target = _guest(lab_name, guest)
    limit = read_timeout or timeout_s + 240
    result, data = _around(state, data_at, data_mib, limit, lambda: fault.reboot(
        state, target, timeout_s=timeout_s, progress=progress))
    _emit(app, result, data)


@command.command("unplug")
@_common
@click.option("--drive", "serial", required=True,
              help="The drive's serial (see 'fxctl lab status -o json'), or its number on the guest (1 = the first).")
@click.option("--yes", is_flag=True, help="Consent: pulling a RAID0 member destroys the array's data.")
@click.option("--timeout", "timeout_s", default=60, show_default=True, type=SECONDS,
              help="Most seconds to wait until the guest released the drive.")
@click.pass_obj
def unplug_cmd(app, lab_name, guest, serial, yes, timeout_s):
    """Pull an NVMe drive out of a guest (QMP device_del; the guest's PCIe hotplug releases it).

    DESTRUCTIVE for RAID0: it has no redundancy, so the data striped over the drive is gone and the
    array cannot be restored with its data (only `fxctl provision --wipe` makes a new, empty one). The
    drive stays out until the lab restarts ('fxctl lab down', 'fxctl lab up': fresh, empty drives).
    """
    from fxctl.lab import fault

    state, target = _guest(lab_name, guest)
    _emit(app, fault.unplug_drive(state, target, serial, yes=yes, timeout_s=timeout_s, progress=progress), None)


@command.command("fill")
@_common
@click.option("--path", required=True, help="The mount point to fill (e.g. /mnt/kvtier).")
@click.option("--seconds", required=True, type=SECONDS, help="How long it stays full.")
@click.option("--leave", default="0", show_default=True, help="Bytes to leave free (e.g. 1MiB).")
@click.pass_obj
def fill_cmd(app, lab_name, guest, path, seconds, leave):
    """Fill the filesystem mounted at --path (fallocate) for --seconds, then remove the fill file."""
    from fxctl.lab import fault
    from fxctl.units import size_bytes

    state, target = _guest(lab_name, guest)
    free = 0 if leave.strip() == "0" else size_bytes(leave, "--leave")
    _emit(app, fault.fill_filesystem(state, target, path, hold_s=seconds, leave=free, progress=progress), None)


@command.command("write")
@name_option
@click.option("--data", "data_at", required=True, metavar="GUEST:/DIR", help="Where to write it (a mounted folder).")
@click.option("--data-mib", default=32, show_default=True, type=click.IntRange(1, 4096), help="MiB to write.")
@click.pass_obj
def write_cmd(app, lab_name, data_at, data_mib):
    """Write a drill's data (random, fsync'ed) and record its sha256, for `check` after a fault of your own.

    For a fault the data's own path cannot ride out in the lab, e.g. a target reboot: its exports come
    back only with `fxctl net apply` and `fxctl provision`, so a read during it just waits for the
    initiator's kernel to give up. Write, reboot, restore, then `check`.
    """
    from fxctl.lab.drill_data import parse_target, write

    state, _ = _guest(lab_name, data_at.partition(":")[0])
    guest, folder = parse_target(data_at, state)
    data = write(state, guest, folder, data_mib)
    emit({"data": {"guest": data.guest, "path": data.path, "size_mib": data.size_mib, "sha256": data.sha256}},
         app.output_format, text=f"data {data.path} on {data.guest}: {data.size_mib} MiB, sha256 {data.sha256}")


@command.command("check")
@name_option
@click.option("--data", "data_at", required=True, metavar="GUEST:/DIR", help="Where a fault's --data wrote it.")
@click.pass_obj
def check_cmd(app, lab_name, data_at):
    """Read the last drill's data again and compare it with the sha256 taken when it was written.

    Use it after a recovery (e.g. `fxctl provision` after a long link cut). The sha256 is kept in the
    guest's /run, so a reboot of that guest forgets it. Exit 0 when the data is intact, 1 when not.
    """
    from fxctl.errors import FxError
    from fxctl.lab.drill_data import check, parse_target

    state, _ = _guest(lab_name, data_at.partition(":")[0])
    guest, folder = parse_target(data_at, state)
    data = check(state, guest, folder)
    line = f"data {data.path} on {data.guest}: " + ("INTACT (sha256 matches)" if data.intact else
                                                    f"NOT INTACT: {data.error_after or 'sha256 differs'}")
    emit({"data": data.to_dict()}, app.output_format, text=line)
    if not data.intact:
        raise FxError(line)


def _guest(lab_name: str, guest: str):
    from fxctl.lab.fault import running_guest
    from fxctl.lab.state import LabState

    state = LabState.load(lab_name)
    return state, running_guest(state, lab_name, guest)


def _around(state, data_at, data_mib, limit, fault):
    from fxctl.lab.drill_data import around

    return around(state, data_at, data_mib, fault, read_limit_s=limit, progress=progress)


def _emit(app, result, data) -> None:
    document = {"fault": result, "data": data.to_dict() if data else None}
    lines = [f"{result.fault} {result.subject} on {result.guest}: {result.seconds:g} s, "
             f"{'restored' if result.restored else 'NOT restored (permanent)'}"]
    lines += [f"  note: {note}" for note in result.notes]
    if data:
        reader = data.reader
        read = ("ok" if reader.get("exit_code") == 0 else
                f"FAILED (exit {reader.get('exit_code')}): {reader.get('error') or '-'}")
        lines.append(f"  read during the fault: {read} ({reader.get('passes', 0)} full passes)")
        writer = data.writer
        wrote = ("ok" if writer.get("exit_code") == 0 else
                 f"FAILED (exit {writer.get('exit_code')}): {writer.get('error') or '-'}")
        lines.append(f"  writes during the fault: {wrote} ({writer.get('passes', 0)} passes); read back: "
                     + ("INTACT" if data.writes_intact else "NOT INTACT"))
        lines.append(f"  data {data.path}: " + ("INTACT (sha256 matches)" if data.intact else
                     f"NOT INTACT: {data.error_after or 'sha256 differs'}"))
    emit(document, app.output_format, text="\n".join(lines))
