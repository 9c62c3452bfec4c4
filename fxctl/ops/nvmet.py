"""Operations of the kernel NVMe-oF target (configfs): what differs from the desired export, changed.

`ExportSpec` is the desired export of one array on its target; `state` is `NvmetConfig`'s parsed value.
Address attributes of a port change only while no subsystem is linked to it, and a namespace's
device_path/device_uuid only while it is disabled: the operations order their commands accordingly.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from fxctl.engine.plan import Operation, Refused
from fxctl.facts.nvmet import CONFIGFS
from fxctl.remote.command import sh


@dataclass(frozen=True)
class NamespaceSpec:
    nsid: int
    device: str          # the drive's /dev/disk/by-id path on the target
    uuid: str


@dataclass(frozen=True)
class PortSpec:
    """One nvmet port the subsystem is linked to (one per path of a multipath array)."""

    port_id: int
    address: str
    port: int

    @property
    def adrfam(self) -> str:
        return "ipv6" if ipaddress.ip_address(self.address).version == 6 else "ipv4"


@dataclass(frozen=True)
class ExportSpec:
    nqn: str
    transport: str
    ports: tuple[PortSpec, ...]
    hosts: tuple[str, ...]
    namespaces: tuple[NamespaceSpec, ...]


def attr_write(path: str, value: str | int):
    return sh("printf", "%s\\n", str(value)).write_to(path)


def sub_path(nqn: str) -> str:
    return f"{CONFIGFS}/subsystems/{nqn}"


def ensure_modules(transport: str, loaded: list[str]) -> Operation:
    wanted = ["nvmet", f"nvmet_{transport}"]
    missing = [m for m in wanted if m not in loaded]
    if not missing:
        return "nvmet and nvmet_" + transport + " are loaded"
    yield sh("modprobe", "-a", *[m.replace("_", "-") for m in missing])
    yield sh("mountpoint", "-q", "/sys/kernel/config").or_else(sh("mount", "-t", "configfs", "none",
                                                                   "/sys/kernel/config"))
    return None


def ensure_hosts(spec: ExportSpec, state: dict) -> Operation:
    missing = [h for h in spec.hosts if h not in state["hosts"]]
    for host in missing:
        yield sh("mkdir", f"{CONFIGFS}/hosts/{host}")
    return None if missing else f"{len(spec.hosts)} host NQN(s) defined"


def ensure_subsystem(spec: ExportSpec, state: dict) -> Operation:
    current = state["subsystems"].get(spec.nqn)
    path = sub_path(spec.nqn)
    if current is None:
        yield sh("mkdir", path)
    if current is None or current["attrs"].get("allow_any_host") != "0":
        yield attr_write(f"{path}/attr_allow_any_host", 0)
        return None
    return "subsystem exists with allow_any_host=0"


def ensure_allowed_hosts(spec: ExportSpec, state: dict) -> Operation:
    current = (state["subsystems"].get(spec.nqn) or {}).get("allowed_hosts", [])
    path = sub_path(spec.nqn)
    extra = [h for h in current if h not in spec.hosts]
    missing = [h for h in spec.hosts if h not in current]
    for host in extra:
        yield sh("rm", f"{path}/allowed_hosts/{host}")
    for host in missing:
        yield sh("ln", "-s", f"{CONFIGFS}/hosts/{host}", f"{path}/allowed_hosts/{host}")
    if not extra and not missing:
        return "exactly the initiators' host NQNs are allowed"
    return None


def ensure_namespace(spec: ExportSpec, ns: NamespaceSpec, state: dict) -> Operation:
    current = ((state["subsystems"].get(spec.nqn) or {}).get("namespaces") or {}).get(str(ns.nsid))
    path = f"{sub_path(spec.nqn)}/namespaces/{ns.nsid}"
    if current is not None and current.get("device_path") == ns.device and \
            current.get("device_uuid") == ns.uuid and current.get("enable") == "1":
        return f"namespace {ns.nsid} exports {ns.device}"
    if current is None:
        yield sh("mkdir", path)
    elif current.get("enable") == "1":
        yield attr_write(f"{path}/enable", 0)
    yield attr_write(f"{path}/device_path", ns.device)
    yield attr_write(f"{path}/device_uuid", ns.uuid)
    yield attr_write(f"{path}/enable", 1)
    return None


def ensure_no_stray_namespaces(spec: ExportSpec, state: dict) -> Operation:
    current = (state["subsystems"].get(spec.nqn) or {}).get("namespaces") or {}
    wanted = {str(ns.nsid) for ns in spec.namespaces}
    stray = sorted(set(current) - wanted, key=int)
    for nsid in stray:
        path = f"{sub_path(spec.nqn)}/namespaces/{nsid}"
        yield attr_write(f"{path}/enable", 0)
        yield sh("rmdir", path)
    return None if stray else "no other namespaces"


def ensure_port(spec: ExportSpec, want: PortSpec, state: dict) -> Operation:
    port = state["ports"].get(str(want.port_id))
    path = f"{CONFIGFS}/ports/{want.port_id}"
    wanted = {"trtype": spec.transport, "adrfam": want.adrfam, "traddr": want.address,
              "trsvcid": str(want.port)}
    linked = port["subsystems"] if port else []
    differs = port is None or any(port["addr"].get(k) != v for k, v in wanted.items())
    if differs:
        others = [nqn for nqn in linked if nqn != spec.nqn]
        if others:
            raise Refused(f"port {want.port_id} has another address and also exports {', '.join(others)}; "
                          "fxctl will not re-address a port other subsystems use")
        if port is None:
            yield sh("mkdir", path)
        for nqn in linked:
            yield sh("rm", f"{path}/subsystems/{nqn}")
        for key, value in wanted.items():
            yield attr_write(f"{path}/addr_{key}", value)
        linked = []
    if spec.nqn not in linked:
        yield sh("ln", "-s", sub_path(spec.nqn), f"{path}/subsystems/{spec.nqn}")
        return None
    return f"port {want.port_id} listens on {spec.transport} {want.address}:{want.port}"
