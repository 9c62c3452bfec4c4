"""Facts about block devices: lsblk's tree, /dev/disk/by-id links, on-disk signatures, mounts."""

from __future__ import annotations

import json

from fxctl.engine.fact import Fact
from fxctl.facts import export_sections
from fxctl.remote.command import script, sh

LSBLK_COLUMNS = "NAME,PATH,SERIAL,SIZE,TYPE,FSTYPE,LABEL,PTTYPE,MOUNTPOINT,MODEL"


class BlockDevices(Fact):
    """Whole disks (type disk) with their children: partitions, md arrays, mounts."""

    def command(self):
        return sh("lsblk", "-J", "-b", "-o", LSBLK_COLUMNS)

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, dict]:
        tree = json.loads(stdout)
        disks: dict[str, dict] = {}
        for device in tree.get("blockdevices", []):
            if device.get("type") != "disk":
                continue
            children = [c.get("path") or f"/dev/{c.get('name')}" for c in device.get("children") or []]
            held = [f"{c.get('path') or c.get('name')}" + (f" (mounted at {c['mountpoint']})"
                                                         if c.get("mountpoint") else f" ({c.get('type')})")
                    for c in _descendants(device) if c.get("mountpoint") or c.get("type") != "part"]
            path = device.get("path") or f"/dev/{device['name']}"
            disks[path] = {
                "path": path, "serial": (device.get("serial") or "").strip() or None,
                "size": int(device.get("size") or 0), "fstype": device.get("fstype"),
                "label": device.get("label"), "pttype": device.get("pttype"),
                "mountpoint": device.get("mountpoint"), "children": children,
                "held_by": held,  # what keeps it open: a mount, an md or dm device (a bare partition does not)
                "model": (device.get("model") or "").strip() or None,
            }
        return disks


def _descendants(device: dict) -> list[dict]:
    found = []
    for child in device.get("children") or []:
        found += [child, *_descendants(child)]
    return found


class DiskById(Fact):
    """/dev/disk/by-id link name -> kernel device path."""

    def command(self):
        return script(r"""cd /dev/disk/by-id 2>/dev/null || exit 0
for l in *; do test -L "$l" && printf '%s\t%s\n' "$l" "$(readlink -f "$l")"; done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, str]:
        links = {}
        for line in stdout.splitlines():
            name, _, target = line.partition("\t")
            if name and target:
                links[f"/dev/disk/by-id/{name}"] = target
        return links


class Signatures(Fact):
    """Low-level probe (blkid -p) of every whole disk: filesystem, RAID or partition-table signatures; {} for
    a blank disk, {"PROBE_ERROR": status} where blkid -p could not tell (8: more than one signature, 4: a
    read error), which callers must not take for blank."""

    def command(self):
        return script(r"""for d in $(lsblk -dnpo PATH -e 7,11); do
echo "## $d"; blockdev --flushbufs "$d" 2>/dev/null; blkid -p -o export "$d" 2>/dev/null; echo "PROBE_STATUS=$?"
done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, dict]:
        found = export_sections(stdout)
        for device, probe in found.items():
            status = probe.pop("PROBE_STATUS", "0")
            if status not in ("0", "2"):  # 2: nothing found
                found[device] = {"PROBE_ERROR": status}
        return found


class Mount(Fact):
    """What is mounted at a path (findmnt), or None."""

    ok_codes = (0, 1)

    def __init__(self, target: str):
        self.target = target

    def command(self):
        return sh("findmnt", "-J", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS", "--mountpoint", self.target)

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code == 1 or not stdout.strip():
            return None
        entries = json.loads(stdout).get("filesystems") or []
        if not entries:
            return None
        entry = entries[0]
        return {"target": entry["target"], "source": entry["source"], "fstype": entry["fstype"],
                "options": entry["options"].split(",")}


class Probe(Fact):
    """blkid -p of one device: its TYPE, LABEL, UUID ...; {} when blank; None when absent."""

    ok_codes = (0, 2, 4)  # 2: nothing found; 4: no such device (blkid "usage" for a missing file)

    def __init__(self, device: str):
        self.device = device

    def command(self):
        return script('test -e "$1" || exit 4; blkid -p -o export "$1"', self.device)

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code == 4:
            return None
        return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


class MountUsers(Fact):
    """Processes holding files or their working directory under a mount point: [(pid, command)]."""

    def __init__(self, mount: str):
        self.mount = mount

    def command(self):
        # one find over /proc (a readlink per fd costs a fork each: 30 s on a slow guest)
        return script(r"""m=$1
find /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/fd -maxdepth 1 \( -lname "$m" -o -lname "$m/*" \) \
  2>/dev/null | cut -d/ -f3 | sort -un | while read -r pid; do
  [ "$pid" = "$$" ] && continue
  printf '%s\t%s\n' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)"
done; true""", self.mount)

    def parse(self, stdout: str, exit_code: int = 0) -> list[dict]:
        users = []
        for line in stdout.splitlines():
            pid, _, comm = line.partition("\t")
            if pid.isdigit():
                users.append({"pid": int(pid), "command": comm.strip()})
        return users
