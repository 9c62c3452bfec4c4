"""The target side of md: a drive exported through nvmet carries the md superblock its initiator wrote, and
the target's own mdadm must never assemble it (udev's `mdadm --incremental` does, at boot or on a change
event). Two hosts running one RAID0 corrupt it; a partial, inactive array on the target keeps the drive busy.

Prevent: an `ARRAY <ignore> UUID=...` line in the target's mdadm.conf for each exported array's md UUID
(mdadm.conf(5): an array that matches it "will never be automatically assembled"). It names only fxctl's
arrays, so the target's own arrays (a root on md, say) are assembled as before. Where the target boots
through a Debian initramfs that carries mdadm (it assembles arrays too, from its own copy of mdadm.conf),
the initramfs is refreshed after the line changes.
Repair: an md array on the target that already holds an exported drive is stopped when it is the initiator's
array (the drive's superblock says so, it holds nothing else) and nothing uses it (no mount, no holder).
Stopping an array writes no data; anything else is refused with what holds it.
"""

from __future__ import annotations

from fxctl.engine.plan import Operation, Refused
from fxctl.ops.files import ensure_line, with_managed_line
from fxctl.ops.raid import stop_array
from fxctl.remote.command import sh


def ignore_line(md_uuid_mdadm: str) -> str:
    return f"ARRAY <ignore> UUID={md_uuid_mdadm}"


def ignore_marker(marker: str) -> str:
    """Not the initiator's marker: one host may be the target of one array and the initiator of another."""
    return f"{marker} exported"


def ensure_not_auto_assembled(path: str, md_uuid_mdadm: str, marker: str, current: str | None) -> Operation:
    return (yield from ensure_line(path, ignore_line(md_uuid_mdadm), ignore_marker(marker), current))


def with_ignore_line(md_uuid_mdadm: str, marker: str, current: str | None) -> str:
    return with_managed_line(current, ignore_line(md_uuid_mdadm), ignore_marker(marker))


def ensure_initramfs_current(changed: bool, kernel: str | None) -> Operation:
    """`kernel` is InitramfsWithMdadm's value: the running kernel whose Debian initramfs carries mdadm."""
    if kernel is None:
        return "no initramfs with mdadm to refresh (no update-initramfs, mdadm hook or initrd for this kernel)"
    if not changed:
        return "mdadm.conf unchanged: the initramfs needs no refresh"
    yield sh("update-initramfs", "-u", "-k", kernel)
    return None


def release_exported(array_name: str, drives: dict[str, str], ours: set[str], md_arrays: dict[str, dict]
                     ) -> Operation:
    """Stop md arrays on this host that hold exported drives. `drives`: kernel name (nvme0n1) -> the
    exported path; `ours`: the kernel names whose md superblock is this array's; `md_arrays`: MdArrays."""
    holding = {md: info for md, info in md_arrays.items() if set(info["members"]) & set(drives)}
    if not holding:
        return "no md array on this host holds its drives"
    for md, info in sorted(holding.items()):
        held = ", ".join(drives.get(m, f"/dev/{m}") for m in info["members"])
        if not set(info["members"]) <= ours:
            raise Refused(f"this host's /dev/{md} ({info['state']}) holds {held}, and not only {array_name}'s md "
                          f"members: refusing to export or stop it; stop it by hand if it is not in use")
        users = [f"mounted at {m}" for m in info["mounts"]] + [f"held by {h}" for h in info["holders"]]
        if users:
            raise Refused(f"this host assembled {array_name}'s md array from the drives it exports (/dev/{md}, "
                          f"{info['state']}, {', '.join(users)}): two hosts on one RAID0 corrupt it; "
                          f"unmount it and stop it by hand (mdadm --stop /dev/{md})")
        yield stop_array(f"/dev/{md}")
    return None
