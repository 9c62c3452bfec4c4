"""Facts of a RoCE host's network: links, NIC driver, DCB (iproute2 `dcb -j`), pause, RDMA links, and
configfs/sysfs values (rdma_cm defaults, mlx5 ECN, bnxt_re congestion control), plus `mlnx_qos -i`.

A capability the NIC or the host's tools lack is a value, not an error: `{"supported": False, "error": ...}`
(e.g. virtio-net answers `dcb` with "Operation not supported", iproute2 6.1 knows no `apptrust`).
"""

from __future__ import annotations

import json
import re

from fxctl.engine.fact import Fact
from fxctl.remote.command import script, sh

NOT_INSTALLED = 127  # the shell's "command not found"
ABSENT = 3           # a probe's own exit code: the thing it reads does not exist here


def unsupported(error: str) -> dict:
    return {"supported": False, "error": error.strip().splitlines()[-1] if error.strip() else "no output"}


class Link(Fact):
    """`ip -j link show dev IF`: mtu and operstate, or None when the netdev does not exist."""

    ok_codes = (0, 1)

    def __init__(self, netdev: str):
        self.netdev = netdev

    def command(self):
        return sh("ip", "-j", "link", "show", "dev", self.netdev).quiet_errors()

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code != 0 or not stdout.strip():
            return None
        link = json.loads(stdout)[0]
        return {"mtu": link["mtu"], "operstate": link.get("operstate"), "flags": link.get("flags", [])}


class NicDriver(Fact):
    """The netdev's kernel driver: `ethtool -i` (driver: mlx5_core), else the sysfs driver link (ethtool
    is not installed everywhere, e.g. the lab image). None when neither tells."""

    def __init__(self, netdev: str):
        self.netdev = netdev

    def command(self):
        return script('ethtool -i "$1" 2>/dev/null && exit 0; d=$(readlink "/sys/class/net/$1/device/driver") '
                      '&& echo "driver: ${d##*/}"; true', self.netdev)

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        match = re.search(r"^driver:\s*(\S+)", stdout, re.M)
        return match.group(1) if match else None


class DcbShow(Fact):
    """`dcb -j OBJECT show dev IF` (OBJECT: pfc, app, apptrust, ets), stderr kept to say why it failed.

    pfc: {"pfc_cap": 8, "macsec_bypass": false, "delay": 0, "prio_pfc": [false, ...]}
    app: {"dscp_prio": [[26, 3], ...]} (iproute2 >= 6.5 prints [26, 3, " "]: the first two count)
    apptrust: {"order": ["dscp"]}; ets: {"tc_bw": [...], "tc_tsa": [...], "prio_tc": [...], ...}
    """

    ok_codes = (0, 1, 2, 255, NOT_INSTALLED)
    OBJECTS = ("pfc", "app", "apptrust", "ets")

    def __init__(self, netdev: str, obj: str):
        if obj not in self.OBJECTS:
            raise ValueError(f"dcb object {obj!r} is not one of {self.OBJECTS}")
        self.netdev, self.obj = netdev, obj

    def command(self):
        return script('command -v dcb >/dev/null || { echo "dcb (iproute2) is not installed"; exit 127; }; '
                      'dcb -j "$1" show dev "$2" 2>&1', self.obj, self.netdev)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        text = stdout.strip()
        if exit_code != 0 or not text.startswith("{"):
            reason = text or f"dcb exited {exit_code}"
            if "is unknown" in reason:
                reason = f"this iproute2's dcb has no '{self.obj}' object ({reason.splitlines()[-1]})"
            return unsupported(reason)
        value = json.loads(text)
        if self.obj == "app":
            value = {**value, "dscp_prio": [[int(e[0]), int(e[1])] for e in value.get("dscp_prio", [])]}
        return {"supported": True, **value}


class Pause(Fact):
    """`ethtool -a IF`: global (802.3x) pause {"autoneg", "rx", "tx"} as booleans, or unsupported."""

    ok_codes = (0, 1, 71, 75, 76, 78, 95, NOT_INSTALLED)

    def __init__(self, netdev: str):
        self.netdev = netdev

    def command(self):
        return script('command -v ethtool >/dev/null || { echo "ethtool is not installed"; exit 127; }; '
                      'ethtool -a "$1" 2>&1', self.netdev)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        found = dict(re.findall(r"^(Autonegotiate|RX|TX):\s*(\w+)", stdout, re.M))
        if exit_code != 0 or not {"RX", "TX"} <= found.keys():
            return unsupported(stdout or f"ethtool -a exited {exit_code}")
        return {"supported": True, "autoneg": found.get("Autonegotiate") == "on",
                "rx": found["RX"] == "on", "tx": found["TX"] == "on"}


class RdmaLinks(Fact):
    """`rdma -j link show`: every RDMA port with its state and netdev (None when not bound)."""

    ok_codes = (0, NOT_INSTALLED)

    def command(self):
        return script('command -v rdma >/dev/null || exit 127; rdma -j link show')

    def parse(self, stdout: str, exit_code: int = 0) -> list[dict] | None:
        if exit_code == NOT_INSTALLED:
            return None
        return [{"device": link["ifname"], "port": link["port"], "state": link.get("state"),
                 "netdev": link.get("netdev")} for link in json.loads(stdout or "[]")]


_VALUES = r"""base=$1; make=$2; shift 2
made=
if [ -n "$make" ] && [ ! -d "$make" ] && [ -d "${make%/*}" ]; then mkdir "$make" 2>/dev/null && made=1; fi
for rel in "$@"; do
  p=$base/$rel
  if [ -r "$p" ]; then printf '%s\t%s\n' "$rel" "$(cat "$p" 2>/dev/null | tr '\n\t' '  ')"; fi
done
[ -n "$made" ] && rmdir "$make" 2>/dev/null
true"""


class ConfigValues(Fact):
    """Values of files under a sysfs/configfs folder: {relative path: value}; absent files are left out.

    `make`: a configfs group the kernel exposes only after mkdir (rdma_cm/DEV, bnxt_re/DEV): made to
    read, and removed again when this fact made it (the values live in the driver, not in the folder).
    """

    def __init__(self, base: str, files: tuple[str, ...], make: str = ""):
        self.base, self.files, self.make = base, tuple(files), make

    def command(self):
        return script(_VALUES, self.base, self.make, *self.files)

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, str]:
        values = {}
        for line in stdout.splitlines():
            rel, _, value = line.partition("\t")
            if rel:
                values[rel] = value.strip()
        return values


class RdmaCmDefaults(Fact):
    """RDMA-CM defaults of every RDMA device's ports (configfs, made to read when absent, removed after):
    {device: {"1": {"mode": "RoCE v2", "tos": 106}}} (port numbers as strings, as in JSON); None when rdma_cm's
    configfs is not there (module not loaded, or configfs not mounted)."""

    ok_codes = (0, ABSENT)
    ROOT = "/sys/kernel/config/rdma_cm"

    def command(self):
        return script(r"""root=$1
[ -d "$root" ] || exit 3
for d in /sys/class/infiniband/*; do [ -d "$d" ] || continue; dev=${d##*/}; made=
  [ -d "$root/$dev" ] || { mkdir "$root/$dev" 2>/dev/null && made=1; }
  for p in "$root/$dev"/ports/*; do [ -d "$p" ] || continue
    printf '%s\t%s\t%s\t%s\n' "$dev" "${p##*/}" "$(cat "$p/default_roce_mode" 2>/dev/null)" \
      "$(cat "$p/default_roce_tos" 2>/dev/null)"
  done
  [ -n "$made" ] && rmdir "$root/$dev" 2>/dev/null
done; true""", self.ROOT)

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code == ABSENT:
            return None
        found: dict = {}
        for line in stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 4:
                dev, port, mode, tos = parts
                found.setdefault(dev, {})[port] = {"mode": mode or None,
                                                        "tos": int(tos) if tos.strip().isdigit() else None}
        return found


class MlnxQos(Fact):
    """`mlnx_qos -i IF` (NVIDIA MLNX_OFED/DOCA): trust state, PFC per priority and DSCP -> priority;
    None when mlnx_qos is not installed."""

    ok_codes = (0, NOT_INSTALLED)

    def __init__(self, netdev: str):
        self.netdev = netdev

    def command(self):
        return script('command -v mlnx_qos >/dev/null || exit 127; mlnx_qos -i "$1"', self.netdev)

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code == NOT_INSTALLED:
            return None
        trust = re.search(r"Priority trust state:\s*(\w+)", stdout)
        enabled = re.search(r"^\s*enabled\s+([01](?:\s+[01]){7})\s*$", stdout, re.M)
        dscp2prio = {}
        for prio, dscps in re.findall(r"prio:\s*(\d)\s+dscp:\s*([\d,\s]+)", stdout):
            for dscp in re.findall(r"\d+", dscps):
                dscp2prio[int(dscp)] = int(prio)
        return {"trust": trust.group(1) if trust else None,
                "pfc": [int(v) for v in enabled.group(1).split()] if enabled else None,
                "dscp2prio": dscp2prio}
