"""Operations on the initiator's array: md RAID0 over the fabric namespaces, XFS on it, the mount,
and the lines in mdadm.conf and fstab that bring it back at boot.

Data is never destroyed silently: members or a device that carry someone else's data are refused
unless the user passed --wipe (and named the drives by serial or ID in the inventory).
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.engine.plan import Operation, Refused
from fxctl.facts.md import md_degraded
from fxctl.ops.files import ensure_line, with_managed_line
from fxctl.remote.command import script, sh

XFS_BLOCK = 4096


@dataclass(frozen=True)
class ArrayLayout:
    name: str                  # md array name (/dev/md/<name>)
    device: str                # /dev/md/<name>
    members: tuple[str, ...]   # /dev/disk/by-id/nvme-uuid.* in role order
    chunk_bytes: int
    metadata: str
    md_uuid: str               # mdadm form, aaaaaaaa:bbbbbbbb:cccccccc:dddddddd
    fs_uuid: str
    fs_label: str
    mount: str
    mount_options: tuple[str, ...]
    marker: str


def chunk_arg(chunk_bytes: int) -> str:
    return f"{chunk_bytes // 1024}K"


def mkfs_command(layout: ArrayLayout):
    return sh("mkfs.xfs", "-L", layout.fs_label, "-m", f"uuid={layout.fs_uuid}",
              "-d", f"su={chunk_arg(layout.chunk_bytes).lower()},sw={len(layout.members)}", layout.device)


def release_partial_arrays(layout: ArrayLayout, holders: dict[str, list[dict]]) -> Operation:
    """Stop inactive md arrays that hold members (udev assembles arrays incrementally, and a partial
    one keeps its members busy). An inactive array serves no I/O, so stopping it loses nothing."""
    stale = sorted({h["md"] for m in layout.members for h in holders.get(m, []) if h["state"] == "inactive"})
    for md in stale:
        yield stop_array(f"/dev/{md}")
    return None


# An array whose /dev node udev already removed (found by UUID, or as a holder, through sysfs): mdadm cannot
# open it, the kernel's md sysfs stops it ("clear" frees an array nothing holds open)
_STOP_ARRAY = r"""
d=$1; n=${d##*/}
if [ -e "$d" ]; then exec mdadm --stop "$d"; fi
test -d "/sys/block/$n/md" || exit 0   # the kernel has no such array (a stale name): nothing to stop
echo clear > "/sys/block/$n/md/array_state"
"""


def stop_array(device: str):
    return script(_STOP_ARRAY, device, description=f"mdadm --stop {device}")


# unmount whatever is mounted from the broken array (its XFS shut down at the first I/O error)
_UNMOUNT_FROM = r"""
dev=$(readlink -f "$1")
findmnt -n -o TARGET --source "$dev" | while read -r target; do umount "$target" || exit 1; done
"""


def reassemble_broken(layout: ArrayLayout, detail: dict, problem: str, examine: dict[str, dict | None],
                      holders: dict[str, list[dict]]) -> Operation:
    """A RAID0 that ran and lost members (its controller was removed when ctrl_loss_tmo ran out) serves no
    I/O. Once every member is back (its namespace present, carrying this array's superblock), it is
    unmounted, stopped and assembled again from the same members: the data written before the fault is
    there; writes that failed during it are lost (their writers got I/O errors). While a member is still
    missing it is refused: RAID0 has no redundancy, so without that member there is no array to serve."""
    device = detail.get("device") or layout.device
    back = [m for m in layout.members if (examine.get(m) or {}).get("uuid") == layout.md_uuid]
    missing = [m for m in layout.members if m not in back]
    if missing:
        raise Refused(f"{device} (md UUID {layout.md_uuid}) is degraded: {problem}; not back: {', '.join(missing)}. "
                      "RAID0 has no redundancy, so it serves no I/O until every member is back; fxctl does not stop, "
                      "assemble or recreate it. A path that is down rejoins when its controller reconnects; once the "
                      "namespace of a member whose controller was removed is back, provision again: the array is "
                      "unmounted, stopped and assembled from its members (writes that failed are lost). A member gone "
                      "for good (a drive pulled or lost) cannot be recovered: the data striped over it is gone, and "
                      "only `--wipe` makes a new, empty array")
    yield script(_UNMOUNT_FROM, device, description=f"unmount what is mounted from {device} (broken)")
    yield stop_array(device)
    yield from release_partial_arrays(layout, holders)
    yield sh("mdadm", "--assemble", layout.device, f"--uuid={layout.md_uuid}", *layout.members)
    return None


def ensure_md(layout: ArrayLayout, detail: dict | None, examine: dict[str, dict | None],
              resolved: dict[str, str], wipe: bool, running: dict[str, str] | None = None,
              holders: dict[str, list[dict]] | None = None) -> Operation:
    """The md array is running over exactly the planned members; assembled again if it exists on them.
    `running` is MdScan's value: an array of ours that udev assembled under another name is renamed."""
    wanted = [resolved.get(m, m) for m in layout.members]
    if detail is not None and detail.get("array_state") == "inactive":
        # never started (udev's incremental assembly waiting for members, or members gone before it ran): it
        # serves no I/O and holds no mount, so stopping it loses nothing; then assembled or created as usual.
        # A RAID0 that was running and lost a member is "broken", and is refused below.
        yield stop_array(detail.get("device") or layout.device)
        detail = None
    if detail is not None and (problem := md_degraded(detail)):
        return (yield from reassemble_broken(layout, detail, problem, examine, holders or {}))
    if detail is not None and detail.get("device") not in (None, layout.device):
        running = {**(running or {}), layout.md_uuid: detail["device"]}  # its /dev/md/NAME link is gone
        detail = None
    if detail is None:
        yield from release_partial_arrays(layout, holders or {})
    elsewhere = (running or {}).get(layout.md_uuid)
    if detail is None and elsewhere and elsewhere != layout.device:
        yield stop_array(elsewhere)
        yield sh("mdadm", "--assemble", layout.device, f"--uuid={layout.md_uuid}", *layout.members)
        return None
    if detail is not None:
        problems = []
        if detail["level"] != "raid0":
            problems.append(f"level {detail['level']}")
        if detail["chunk_bytes"] not in (None, layout.chunk_bytes):
            problems.append(f"chunk {detail['chunk_bytes']} bytes")
        if sorted(detail["members"]) != sorted(wanted):
            problems.append(f"members {', '.join(detail['members'])}")
        if problems:
            raise Refused(f"{layout.device} exists with {'; '.join(problems)}, not as planned "
                          f"(raid0, {layout.chunk_bytes} bytes, {', '.join(wanted)}); "
                          "fxctl would have to destroy it: run `fxctl provision --destroy` first if you mean that")
        return f"{layout.device} is active: raid0 over {len(wanted)} members"
    blocks = {m: examine.get(m) for m in layout.members}
    ours = [m for m, sb in blocks.items() if sb and sb.get("uuid") == layout.md_uuid]
    foreign = [m for m, sb in blocks.items() if sb and sb.get("uuid") != layout.md_uuid]
    if len(ours) == len(layout.members):
        yield sh("mdadm", "--assemble", layout.device, f"--uuid={layout.md_uuid}", *layout.members)
        return None
    if foreign or ours:
        if not wipe:
            held = ", ".join(f"{m} (md {blocks[m].get('name')})" for m in foreign + ours)
            raise Refused(f"members carry another md superblock: {held}; pass --wipe to erase them")
        active = [f"{m} by /dev/{h['md']} ({h['state'] or 'running'})" for m in layout.members
                  for h in (holders or {}).get(m, []) if h["state"] != "inactive"]
        if active:  # --zero-superblock would erase members one by one and stop at the first held one
            raise Refused(f"--wipe erases all members or none, and some are held: {', '.join(active)}; "
                          "nothing was wiped: stop that array first")
        yield sh("mdadm", "--zero-superblock", *(foreign + ours))
    yield sh("mdadm", "--create", layout.device, "--level=0", f"--raid-devices={len(layout.members)}",
             f"--chunk={chunk_arg(layout.chunk_bytes)}", f"--metadata={layout.metadata}",
             f"--name={layout.name}", f"--uuid={layout.md_uuid}", "--homehost=<none>", *layout.members)
    # a new array over members that held data (only with --wipe) may expose a stale filesystem at the
    # same offsets: erase its signatures so that the filesystem step makes a fresh one
    yield sh("wipefs", "--all", "--quiet", layout.device)
    return None


def ensure_filesystem(layout: ArrayLayout, probe: dict | None, wipe: bool) -> Operation:
    """XFS with the planned UUID, stripe unit = chunk and stripe width = members."""
    if probe and probe.get("TYPE") == "xfs" and probe.get("UUID") == layout.fs_uuid:
        return f"XFS {layout.fs_label} is on {layout.device}"
    if probe:
        what = probe.get("TYPE") or probe.get("PTTYPE") or "a signature"
        if not wipe:
            raise Refused(f"{layout.device} already holds {what} (UUID {probe.get('UUID', '?')}); "
                          "pass --wipe to replace it")
        yield sh("wipefs", "-a", layout.device)
    yield mkfs_command(layout)
    return None


def ensure_mounted(layout: ArrayLayout, mount: dict | None, md_path: str | None) -> Operation:
    if mount is not None:
        if mount["fstype"] != "xfs" or (md_path and mount["source"] != md_path):
            raise Refused(f"{layout.mount} has {mount['source']} ({mount['fstype']}) mounted, not {layout.device}")
        return f"{layout.mount} is mounted"
    yield sh("mkdir", "-p", layout.mount)
    yield sh("mount", "-t", "xfs", "-o", ",".join(layout.mount_options), layout.device, layout.mount)
    return None


def fstab_line(layout: ArrayLayout) -> str:
    options = list(layout.mount_options) + ["nofail", "_netdev", "x-systemd.requires=nvmf-autoconnect.service",
                                       "x-systemd.device-timeout=120s"]
    return f"UUID={layout.fs_uuid} {layout.mount} xfs {','.join(options)} 0 0"


def mdadm_line(layout: ArrayLayout) -> str:
    return f"ARRAY {layout.device} metadata={layout.metadata} UUID={layout.md_uuid} name={layout.name}"


def ensure_fstab(layout: ArrayLayout, current: str | None) -> Operation:
    return (yield from ensure_line("/etc/fstab", fstab_line(layout), layout.marker, current))


def ensure_mdadm_conf(layout: ArrayLayout, path: str, current: str | None) -> Operation:
    return (yield from ensure_line(path, mdadm_line(layout), layout.marker, current))


def with_fstab_line(layout: ArrayLayout, current: str | None) -> str:
    return with_managed_line(current, fstab_line(layout), layout.marker)


def with_mdadm_line(layout: ArrayLayout, current: str | None) -> str:
    return with_managed_line(current, mdadm_line(layout), layout.marker)
