"""Facts about the host's kernel and network: loaded modules, IP addresses, RDMA devices, paths."""

from __future__ import annotations

import json

from fxctl.engine.fact import Fact
from fxctl.remote.command import script, sh


class LoadedModules(Fact):
    """Which of the named kernel modules are loaded (or built in: /sys/module/NAME exists)."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def command(self):
        return script('for m in "$@"; do test -d "/sys/module/$m" && echo "$m"; done; true', *self.names)

    def parse(self, stdout: str, exit_code: int = 0) -> list[str]:
        return sorted(line.strip() for line in stdout.splitlines() if line.strip())


class IpAddresses(Fact):
    """Every IP address on the host -> its interface (ip -j addr)."""

    def command(self):
        return sh("ip", "-j", "addr", "show")

    def parse(self, stdout: str, exit_code: int = 0) -> dict[str, str]:
        found = {}
        for link in json.loads(stdout or "[]"):
            for addr in link.get("addr_info", []):
                found[addr["local"]] = link["ifname"]
        return found


class RdmaDevices(Fact):
    """RDMA devices and the netdev each port is bound to (sysfs)."""

    def command(self):
        return script(r"""for d in /sys/class/infiniband/*; do test -d "$d" || continue
for p in "$d"/ports/*; do printf '%s\t%s\t%s\n' "${d##*/}" "${p##*/}" "$(cat "$p/gid_attrs/ndevs/0" 2>/dev/null)"
done; done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> list[dict]:
        devices = []
        for line in stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                devices.append({"device": parts[0], "port": int(parts[1]), "netdev": parts[2] or None})
        return devices


class Realpath(Fact):
    """The canonical path of a device link, or None when it does not exist."""

    ok_codes = (0, 1)

    def __init__(self, path: str):
        self.path = path

    def command(self):
        return sh("readlink", "-e", self.path)

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        return stdout.strip() or None if exit_code == 0 else None


class FirstExisting(Fact):
    """The first of several paths that exists (e.g. /etc/mdadm/mdadm.conf on Debian, /etc/mdadm.conf)."""

    def __init__(self, paths: tuple[str, ...]):
        self.paths = paths

    def command(self):
        return script('for p in "$@"; do test -e "$p" && { echo "$p"; exit 0; }; done; true', *self.paths)

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        return stdout.strip() or None
