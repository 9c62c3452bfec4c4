"""The validated inventory as plain dataclasses: what the rest of fxctl reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fxctl.inventory.validators import parse_size

DEFAULT_CONNECT = {  # cache-tier defaults: fail fast rather than hang I/O forever
    "nr_io_queues": 8, "queue_size": 128, "keep_alive_tmo": 5, "ctrl_loss_tmo": 60,
    "reconnect_delay": 2, "fast_io_fail_tmo": 5, "tos": -1,
}
DEFAULT_MOUNT_OPTIONS = ("noatime", "logbsize=256k", "largeio", "swalloc")


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    host_key: str | None = None
    known_hosts: str | None = None
    sudo: bool = False
    connect_timeout: int = 10
    roles: tuple[str, ...] = ()
    hostnqn: str | None = None
    hostid: str | None = None


@dataclass(frozen=True)
class Drive:
    serial: str | None = None
    by_id: str | None = None

    @property
    def ref(self) -> str:
        return f"serial {self.serial}" if self.serial else self.by_id  # type: ignore[return-value]


@dataclass(frozen=True)
class ArraySpec:
    name: str
    target: str
    nqn: str
    listen_address: str
    drives: tuple[Drive, ...]
    initiators: tuple[str, ...]
    mount: str
    transport: str = "rdma"
    listen_port: int = 4420
    connect: dict = field(default_factory=lambda: dict(DEFAULT_CONNECT))
    chunk_bytes: int = 64 * 1024
    metadata: str = "1.2"
    raid_name: str = ""
    fs_label: str = ""
    mount_options: tuple[str, ...] = DEFAULT_MOUNT_OPTIONS


@dataclass(frozen=True)
class InterfaceSpec:
    host: str
    netdev: str | None = None
    rdma_device: str | None = None
    address: str | None = None
    soft_roce: bool = False


@dataclass(frozen=True)
class NetworkSpec:
    interfaces: tuple[InterfaceSpec, ...]
    driver: str = "auto"
    pfc_priority: int = 3
    dscp_map: tuple[tuple[int, int], ...] = ((26, 3), (48, 6))
    trust: str = "dscp"
    ets: tuple[int, ...] = ()
    ecn: bool = True
    cnp_dscp: int = 48
    cnp_priority: int = 6
    roce_tos: int = 106
    mtu: int = 9000
    global_pause: bool = False


@dataclass(frozen=True)
class ServeSpec:
    hosts: tuple[str, ...]
    profile: str | None = None
    engine: str = "vllm"
    model: str | None = None
    tensor_parallel: int | None = None
    instances: int = 1
    port: int = 8000
    max_num_seqs: int | None = None
    l1_bytes: int | None = None
    l2_bytes: int | None = None
    l2_dir: str | None = None
    python: str = "python3"


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: dict[str, Host]
    groups: dict[str, tuple[str, ...]]
    arrays: tuple[ArraySpec, ...] = ()
    network: NetworkSpec | None = None
    serve: ServeSpec | None = None
    lab: dict = field(default_factory=dict)

    def select(self, names_or_groups: list[str] | None = None) -> list[Host]:
        """Hosts by name, group or role; all hosts when nothing is asked."""
        if not names_or_groups:
            return list(self.hosts.values())
        chosen: dict[str, Host] = {}
        for item in names_or_groups:
            names = self.groups.get(item) or [h.name for h in self.hosts.values() if item in h.roles]
            if item in self.hosts:
                names = [item]
            for name in names:
                chosen[name] = self.hosts[name]
        return list(chosen.values())


def build_host(name: str, raw: dict, defaults: dict) -> Host:
    merged = {**defaults, **raw}
    return Host(name=name, address=merged["address"], port=merged.get("port", 22),
                user=merged.get("user", "root"), key=merged.get("key"), host_key=merged.get("host_key"),
                known_hosts=merged.get("known_hosts"), sudo=merged.get("sudo", False),
                connect_timeout=merged.get("connect_timeout", 10), roles=tuple(merged.get("roles", ())),
                hostnqn=merged.get("hostnqn"), hostid=merged.get("hostid"))


def build_array(raw: dict) -> ArraySpec:
    raid = raw.get("raid", {})
    fs = raw["filesystem"]
    return ArraySpec(
        name=raw["name"], target=raw["target"], nqn=raw["nqn"], transport=raw.get("transport", "rdma"),
        listen_address=raw["listen"]["address"], listen_port=raw["listen"].get("port", 4420),
        drives=tuple(Drive(serial=str(d["serial"]) if "serial" in d else None, by_id=d.get("by_id"))
                     for d in raw["drives"]),
        initiators=tuple(raw["initiators"]), connect={**DEFAULT_CONNECT, **raw.get("connect", {})},
        chunk_bytes=parse_size(raid.get("chunk", "64K")) or 65536, metadata=raid.get("metadata", "1.2"),
        raid_name=raid.get("name", raw["name"]), fs_label=fs.get("label", raw["name"])[:12],
        mount=fs["mount"], mount_options=tuple(fs.get("options", DEFAULT_MOUNT_OPTIONS)))


def build_network(raw: dict) -> NetworkSpec:
    interfaces = tuple(InterfaceSpec(host=host, netdev=i.get("netdev"), rdma_device=i.get("rdma_device"),
                                     address=i.get("address"), soft_roce=i.get("soft_roce", False))
                       for host, items in raw["interfaces"].items() for i in items)
    cnp = raw.get("cnp", {})
    dscp_map = raw.get("dscp_map", {26: 3, 48: 6})
    return NetworkSpec(
        interfaces=interfaces, driver=raw.get("driver", "auto"), pfc_priority=raw.get("pfc_priority", 3),
        dscp_map=tuple(sorted((int(k), int(p)) for k, p in dscp_map.items())), trust=raw.get("trust", "dscp"),
        ets=tuple(raw.get("ets", ())), ecn=raw.get("ecn", True), cnp_dscp=cnp.get("dscp", 48),
        cnp_priority=cnp.get("priority", 6), roce_tos=raw.get("roce_tos", 106), mtu=raw.get("mtu", 9000),
        global_pause=raw.get("global_pause", False))


def build_serve(raw: dict) -> ServeSpec:
    return ServeSpec(
        hosts=tuple(raw["hosts"]), profile=raw.get("profile"), engine=raw.get("engine", "vllm"),
        model=raw.get("model"), tensor_parallel=raw.get("tensor_parallel"), instances=raw.get("instances", 1),
        port=raw.get("port", 8000), max_num_seqs=raw.get("max_num_seqs"),
        l1_bytes=parse_size(raw["l1_size"]) if "l1_size" in raw else None,
        l2_bytes=parse_size(raw["l2_size"]) if "l2_size" in raw else None,
        l2_dir=raw.get("l2_dir"), python=raw.get("python", "python3"))


def build_inventory(path: Path, data: dict) -> Inventory:
    defaults = data.get("defaults", {})
    hosts = {name: build_host(name, raw, defaults) for name, raw in data["hosts"].items()}
    groups = {name: tuple(members) for name, members in data.get("groups", {}).items()}
    return Inventory(
        path=path, hosts=hosts, groups=groups,
        arrays=tuple(build_array(a) for a in data.get("arrays", [])),
        network=build_network(data["network"]) if "network" in data else None,
        serve=build_serve(data["serve"]) if "serve" in data else None,
        lab=dict(data.get("lab", {})))
