"""Facts of md RAID: an array's detail (mdadm --export plus sysfs) and members' superblocks."""

from __future__ import annotations

from fxctl.engine.fact import Fact
from fxctl.facts import export_sections
from fxctl.remote.command import script

_DETAIL = r"""
dev=$1
if ! test -e "$dev"; then
  # udev removes /dev/md/NAME when a member goes away: find the running array by its UUID instead
  dev=
  for b in /sys/block/md*; do
    test -n "$2" && test -e "$b" || continue
    if mdadm --detail --export "/dev/${b##*/}" 2>/dev/null | grep -qx "MD_UUID=$2"; then dev=/dev/${b##*/}; break; fi
  done
  # a RAID0 that lost every member answers no mdadm --detail: mdadm's own map still names it, by the path
  # it was made at (the UUID there may be in another byte order than mdadm --detail's)
  if test -z "$dev" && test -n "$2"; then
    m=$(awk -v u="$2" -v d="$1" '$3 == u || $4 == d { print $1; exit }' /run/mdadm/map 2>/dev/null)
    test -n "$m" && test -d "/sys/block/$m/md" && dev=/dev/$m
  fi
  test -n "$dev" || exit 4
  echo "FOUND_AT=$dev"
fi
md=$(basename "$(readlink -f "$dev")")
if ! mdadm --detail --export "$dev" 2>/dev/null; then
  test -d "/sys/block/$md/md" || exit 5
  echo "MD_DETAIL=unreadable"   # the kernel has the array, mdadm cannot read it (no member left): sysfs only
fi
for a in level chunk_size raid_disks array_state metadata_version; do
  printf 'SYSFS_%s=%s\n' "$a" "$(cat "/sys/block/$md/md/$a" 2>/dev/null)"
done
"""


def parse_export(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


class MdDetail(Fact):
    """An md array's state, or None when it is not running. Found by its device path or, when that link
    is gone, by its UUID (mdadm form); "device" is then where it was found, else None."""

    ok_codes = (0, 4, 5)

    def __init__(self, device: str, uuid: str | None = None):
        self.device = device
        self.uuid = uuid

    def command(self):
        return script(_DETAIL, self.device, self.uuid or "")

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code in (4, 5):
            return None
        raw = parse_export(stdout)
        members = sorted((int(raw[key]), raw[key.removesuffix("_ROLE") + "_DEV"])
                         for key in raw if key.startswith("MD_DEVICE_") and key.endswith("_ROLE")
                         and raw[key].isdigit())
        raid_disks = raw.get("SYSFS_raid_disks", "")
        return {
            "level": raw.get("MD_LEVEL") or raw.get("SYSFS_level") or None,
            "devices": int(raw.get("MD_DEVICES") or (raid_disks if raid_disks.isdigit() else 0)),
            "uuid": raw.get("MD_UUID"), "name": raw.get("MD_NAME"), "metadata": raw.get("MD_METADATA"),
            "members": [dev for _, dev in members],
            "chunk_bytes": int(raw["SYSFS_chunk_size"]) if raw.get("SYSFS_chunk_size", "").isdigit() else None,
            "array_state": raw.get("SYSFS_array_state") or None,
            "device": raw.get("FOUND_AT"),
        }


def md_degraded(detail: dict) -> str | None:
    """What is wrong with a running RAID0 whose members went away (the kernel says "broken"), or None."""
    problems = []
    if detail.get("array_state") in ("broken", "inactive", "suspended"):
        problems.append(f"array_state {detail['array_state']}")
    if detail.get("devices") and len(detail["members"]) < detail["devices"]:
        problems.append(f"{len(detail['members'])} of {detail['devices']} members present")
    return ", ".join(problems) or None


class MdExamine(Fact):
    """md superblocks on member devices: path -> {uuid, name, level} or {} (no superblock)."""

    def __init__(self, devices: list[str]):
        self.devices = devices

    def command(self):
        return script(r"""for d in "$@"; do echo "## $d"; test -e "$d" || { echo "ABSENT=1"; continue; }
mdadm --examine --export "$d" 2>/dev/null; done; true""", *self.devices)

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, dict | None]:
        found: dict[str, dict | None] = {dev: (None if raw.get("ABSENT") else raw)
                                         for dev, raw in export_sections(stdout).items()}
        return {dev: (None if raw is None else
                      {"uuid": raw.get("MD_UUID"), "name": raw.get("MD_NAME"), "level": raw.get("MD_LEVEL")}
                      if raw else {}) for dev, raw in found.items()}


class MdScan(Fact):
    """Running md arrays: UUID (mdadm form) -> the device mdadm names (`mdadm --detail --scan`)."""

    def command(self):
        return script("mdadm --detail --scan 2>/dev/null; true")

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, str]:
        arrays = {}
        for line in stdout.splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "ARRAY":
                fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
                if "UUID" in fields:
                    arrays[fields["UUID"]] = words[1]
        return arrays


class MemberHolders(Fact):
    """md arrays holding each device (sysfs holders) with the array's state, e.g. an array udev assembled
    only partly: {device: [{"md": "md127", "state": "inactive"}]}."""

    def __init__(self, devices: list[str]):
        self.devices = devices

    def command(self):
        return script(r"""for d in "$@"; do
  test -e "$d" || continue
  b=$(basename "$(readlink -f "$d")")
  for h in /sys/class/block/"$b"/holders/*; do
    test -e "$h" || continue
    printf '%s\t%s\t%s\n' "$d" "${h##*/}" "$(cat "/sys/block/${h##*/}/md/array_state" 2>/dev/null)"
  done
done; true""", *self.devices)

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, list[dict]]:
        holders: dict[str, list[dict]] = {}
        for line in stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                holders.setdefault(parts[0], []).append({"md": parts[1], "state": parts[2]})
        return holders


class MdArrays(Fact):
    """Every md array the kernel has (any state), from sysfs: {"md127": {"state": "inactive",
    "members": ["nvme0n1"], "holders": [], "mounts": []}}. What a host assembled by itself shows here."""

    def command(self):
        return script(r"""for b in /sys/block/md*; do
  test -d "$b/md" || continue
  n=${b##*/}
  printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$(cat "$b/md/array_state" 2>/dev/null)" \
    "$(ls "$b/slaves" 2>/dev/null | tr '\n' ' ')" \
    "$(ls "$b/holders" 2>/dev/null | tr '\n' ' ')" "$(findmnt -rn -o TARGET -S "/dev/$n" 2>/dev/null | tr '\n' ' ')"
done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, dict]:
        arrays = {}
        for line in stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 5 and parts[0]:
                arrays[parts[0]] = {"state": parts[1], "members": parts[2].split(), "holders": parts[3].split(),
                                    "mounts": parts[4].split()}
        return arrays


class InitramfsWithMdadm(Fact):
    """The running kernel's version when it boots through a Debian initramfs that carries mdadm (which
    assembles arrays before the root's udev does, from its own copy of mdadm.conf); None otherwise."""

    def command(self):
        return script(r"""k=$(uname -r)
command -v update-initramfs >/dev/null && test -e /usr/share/initramfs-tools/hooks/mdadm \
  && test -e "/boot/initrd.img-$k" && echo "$k"; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        return stdout.strip() or None
