"""Facts of the kernel NVMe-oF target: the nvmet configfs tree and its modules."""

from __future__ import annotations

import re

from fxctl.engine.fact import Fact
from fxctl.remote.command import script

CONFIGFS = "/sys/kernel/config/nvmet"
_ATTR_LINE = re.compile(r"^((?:[^/]+/)+?)([a-z_0-9]+):(.*)$")
NOT_LOADED = 3

_DUMP = r"""
test -d "$1" || exit 3
cd "$1" || exit 3
echo '## dirs'
find hosts subsystems ports -mindepth 1 -maxdepth 3 -type d 2>/dev/null
echo '## attrs'
grep -rsH . hosts subsystems ports 2>/dev/null
echo '## links'
find hosts subsystems ports -type l -printf '%p\t%l\n' 2>/dev/null
true
"""




NVMET_MODULES = ("nvmet", "nvmet_rdma", "nvmet_tcp", "configfs")


class NvmetConfig(Fact):
    """The nvmet configfs tree as data: hosts, subsystems (attrs, allowed hosts, namespaces), ports."""

    ok_codes = (0, NOT_LOADED)

    def command(self):
        return script(_DUMP, CONFIGFS)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        state: dict = {"loaded": exit_code != NOT_LOADED, "hosts": [], "subsystems": {}, "ports": {}}
        if exit_code == NOT_LOADED:
            return state
        section = None
        for line in stdout.splitlines():
            if line.startswith("## "):
                section = line[3:].strip()
                continue
            if not line.strip():
                continue
            if section == "dirs":
                _add_dir(state, line.strip().split("/"))
            elif section == "attrs":
                # "subsystems/<nqn: has colons>/attr_x:<value: may have / and :>". An attribute's file
                # name is [a-z_]+ and a directory never starts like that followed by ":" (NQNs start
                # "nqn."), so the shortest directory prefix followed by "name:" is the path.
                match = _ATTR_LINE.match(line)
                if match:
                    _add_attr(state, (match.group(1) + match.group(2)).split("/"), match.group(3).strip())
            elif section == "links":
                path, _, target = line.partition("\t")
                _add_link(state, path.split("/"), target.strip())
        state["hosts"].sort()
        return state


def _subsystem(state: dict, nqn: str) -> dict:
    return state["subsystems"].setdefault(nqn, {"attrs": {}, "allowed_hosts": [], "namespaces": {}})


def _port(state: dict, port: str) -> dict:
    return state["ports"].setdefault(port, {"addr": {}, "subsystems": []})


def _add_dir(state: dict, parts: list[str]) -> None:
    kind = parts[0]
    if kind == "hosts" and len(parts) == 2:
        state["hosts"].append(parts[1])
    elif kind == "subsystems" and len(parts) >= 2:
        subsystem = _subsystem(state, parts[1])
        if len(parts) == 4 and parts[2] == "namespaces":
            subsystem["namespaces"].setdefault(parts[3], {})
    elif kind == "ports" and len(parts) >= 2:
        _port(state, parts[1])


def _add_attr(state: dict, parts: list[str], value: str) -> None:
    kind, name = parts[0], parts[-1]
    if kind == "subsystems" and len(parts) == 3:
        _subsystem(state, parts[1])["attrs"][name.removeprefix("attr_")] = value
    elif kind == "subsystems" and len(parts) == 5 and parts[2] == "namespaces":
        _subsystem(state, parts[1])["namespaces"].setdefault(parts[3], {})[name] = value
    elif kind == "ports" and len(parts) == 3 and name.startswith("addr_"):
        _port(state, parts[1])["addr"][name.removeprefix("addr_")] = value


def _add_link(state: dict, parts: list[str], target: str) -> None:
    if parts[0] == "subsystems" and len(parts) == 4 and parts[2] == "allowed_hosts":
        _subsystem(state, parts[1])["allowed_hosts"].append(parts[3])
        _subsystem(state, parts[1])["allowed_hosts"].sort()
    elif parts[0] == "ports" and len(parts) == 4 and parts[2] == "subsystems":
        _port(state, parts[1])["subsystems"].append(parts[3])
        _port(state, parts[1])["subsystems"].sort()
