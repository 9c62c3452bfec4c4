"""The inventory's shapes, each declared once: its keys, types, limits and defaults.

Reading a file validates it against these shapes (fxctl.inventory.problems maps each error to file:line);
the validated objects are what the rest of fxctl reads. A key the file does not set takes the default
written here and nowhere else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from fxctl.errors import BadInput
from fxctl.inventory import validators as v
from fxctl.inventory.fields import Bool, Str, between, checked, fraction, items, one_of, refuse, shape, size, unique
from fxctl.serve.listen import METRICS_ADDRESSES
from fxctl.serve.router_settings import MODES as ROUTER_MODES
from fxctl.serve.router_settings import POLICIES as ROUTER_POLICIES
from fxctl.serve.vllm_flags import INT_RANGES

ROLES = ("target", "initiator", "server", "client")
IOPOLICIES = ("queue-depth", "round-robin", "numa")   # the kernel's nvme-subsystem iopolicy values
Name = checked(v.name)
Port = between(1, 65535)
Seconds = between(0, 86400)
Priority = between(0, 7)
Dscp = between(0, 63)


@shape
class HostOptions:
    """What `defaults:` may set for every host; a host's own key wins."""

    port: Port = 22
    user: checked(v.user) = "root"
    key: Str | None = None                 # private key file
    known_hosts: Str | None = None         # known_hosts file that verifies the host key
    sudo: Bool = False                     # run commands through sudo -n
    connect_timeout: between(1, 600) = 10  # seconds


@shape
class HostEntry(HostOptions):
    """A host as written under `hosts:`, keyed by its name."""

    address: checked(v.host_address)       # management address (SSH)
    host_key: checked(v.host_key) | None = None  # pinned: public key line or SHA256 fingerprint
    roles: unique(one_of(*ROLES)) = ()
    hostnqn: checked(v.nqn) | None = None  # NVMe host NQN of this initiator
    hostid: Name | None = None             # NVMe host ID (UUID)
    # free-form labels, never sent to commands; not hashed, so that a Host stays usable as a key
    vars: dict[Name, Str] = dataclasses.field(default_factory=dict, hash=False)


@shape
class Host(HostEntry):
    name: Str


@shape
class Drive:
    serial: checked(v.serial, Any) | None = None
    by_id: checked(v.by_id_path) | None = None

    @model_validator(mode="after")
    def _exactly_one(self):
        present = [k for k in ("serial", "by_id") if getattr(self, k) is not None]
        if len(present) != 1:
            raise refuse("give exactly one of: serial, by_id" + (f" (found {', '.join(present)})" if present else ""))
        if self.serial is not None:
            object.__setattr__(self, "serial", str(self.serial))
        return self

    @property
    def ref(self) -> str:
        return f"serial {self.serial}" if self.serial else self.by_id  # type: ignore[return-value]


@shape
class Listen:
    """One path to the array's subsystem: a target port (address, port) and, optionally, the initiator's
    interface that reaches it (connections are bound to it; without it the initiator's routes choose)."""

    address: checked(v.ip_address)
    port: Port = 4420
    interface: checked(v.ifname) | None = None

    @property
    def label(self) -> str:
        return f"{self.address}:{self.port}" + (f" via {self.interface}" if self.interface else "")


@shape
class Connect:
    """nvme connect parameters for the initiator; docs/provision.md "Path loss" says why these defaults."""

    nr_io_queues: between(1, 1024) = 8
    queue_size: between(16, 1024) = 128
    keep_alive_tmo: Seconds = 5
    ctrl_loss_tmo: between(-1, 86400) = -1    # reconnect forever: a deleted controller is a lost RAID0 member
    reconnect_delay: between(1, 86400) = 2    # seconds between attempts
    fast_io_fail_tmo: between(-1, 86400) = 5  # fail I/O after this while reconnecting goes on; -1: queue it
    tos: between(-1, 255) = -1                # -1: the kernel's default
    # native multipath's I/O policy for an array with several paths (fxctl.ops.multipath): None is
    # queue-depth where the kernel has it (6.11+), round-robin on older kernels
    iopolicy: one_of(*IOPOLICIES) | None = None


@shape
class Raid:
    chunk: size(v.md_chunk) = 64 << 10  # bytes
    metadata: one_of("1.2") = "1.2"
    name: Name | None = None             # the array's name when not given


@shape
class Filesystem:
    mount: checked(v.array_mount)        # not over a directory the system lives in (/usr, /var, ...)
    type: one_of("xfs") = "xfs"
    label: checked(v.xfs_label) | None = None   # the array's name (its first 12 characters) when not given
    options: unique(checked(v.xfs_mount_option)) = ("noatime", "logbsize=256k", "largeio", "swalloc")


@shape
class ArraySpec:
    name: Name
    target: Name                         # host that exports the drives
    nqn: checked(v.nqn)                  # subsystem NQN
    listen: Listen | None = None         # one path; or
    paths: items(Listen, min_items=2) | None = None   # two or more: NVMe native multipath
    drives: items(Drive, min_items=1)
    initiators: unique(Name, min_items=1)
    filesystem: Filesystem
    transport: one_of("rdma", "tcp") = "rdma"
    connect: Connect = Connect()
    raid: Raid = Raid()

    @model_validator(mode="after")
    def _one_way_to_listen(self):
        if (self.listen is None) == (self.paths is None):
            raise refuse("give exactly one of: listen (one path), paths (two or more: native multipath)"
                         + (" (found both)" if self.listen is not None else ""))
        seen = set()
        for index, path in enumerate(self.paths or ()):
            if (path.address, path.port) in seen:
                raise refuse(f"{path.address}:{path.port} is listed twice", at=("paths", index))
            seen.add((path.address, path.port))
        return self

    @property
    def listen_paths(self) -> tuple[Listen, ...]:
        """Every path to the subsystem, the first one first (one for an array with `listen:`)."""
        return self.paths or (self.listen,)  # type: ignore[return-value]

    multipath = property(lambda self: len(self.listen_paths) > 1)
    chunk_bytes = property(lambda self: self.raid.chunk)
    metadata = property(lambda self: self.raid.metadata)
    raid_name = property(lambda self: self.raid.name or self.name)
    fs_label = property(lambda self: (self.filesystem.label or self.name)[:12])
    mount = property(lambda self: self.filesystem.mount)
    mount_options = property(lambda self: self.filesystem.options)


@shape
class InterfaceEntry:
    netdev: checked(v.ifname) | None = None
    rdma_device: checked(v.rdma_device) | None = None
    address: checked(v.ip_interface) | None = None
    soft_roce: Bool = False              # create a Soft-RoCE (rxe) device on the netdev


@shape(kw_only=False)
class InterfaceSpec(InterfaceEntry):
    host: Str


@shape
class Cnp:
    dscp: Dscp = 48
    priority: Priority = 6


@shape
class NetworkSpec:
    interfaces: dict[Name, items(InterfaceEntry, min_items=1)]
    driver: one_of("auto", "dcb", "mlx5", "bnxt") = "auto"
    pfc_priority: Priority = 3
    dscp_map: dict[Dscp, Priority] = ((26, 3), (48, 6))  # read as sorted (dscp, priority) pairs
    trust: one_of("dscp", "pcp") = "dscp"
    ets: tuple[between(0, 100), ...] = ()
    ecn: Bool = True
    cnp: Cnp = Cnp()
    roce_tos: between(0, 255) = 106
    mtu: between(1280, 9216) = 9000
    global_pause: Bool = False

    cnp_dscp = property(lambda self: self.cnp.dscp)
    cnp_priority = property(lambda self: self.cnp.priority)

    @field_validator("interfaces", mode="after")
    @classmethod
    def _per_host(cls, value: dict) -> tuple[InterfaceSpec, ...]:
        return tuple(InterfaceSpec(host=host, **_fields(item)) for host, items in value.items() for item in items)

    @field_validator("dscp_map", mode="after")
    @classmethod
    def _pairs(cls, value: dict) -> tuple[tuple[int, int], ...]:
        return tuple(sorted(value.items()))


@shape
class RouterSpec:
    """serve.router: the vllm-router in front of the replicas (fxctl.serve.router_settings declares the
    choices and defaults; a key not set here falls to the profile's, then to those)."""

    mode: one_of(*ROUTER_MODES) | None = None      # auto (more than one engine), on, off
    policy: one_of(*ROUTER_POLICIES) | None = None
    port: between(1, 65534) | None = None           # its metrics take the next port
    host: Name | None = None                        # an inventory host with the serving env


@shape
class ServeSpec:
    """Every optional key is None when the file does not set it: profile -> inventory -> CLI merge by
    "what was set" (`spec.set_fields()`), never by comparing with a default."""

    hosts: unique(Name, min_items=1)
    profile: Name | None = None
    engine: one_of("vllm", "sim") | None = None
    model: checked(v.model) | None = None
    tensor_parallel: between(1, 64) | None = None
    pipeline_parallel: between(1, 64) | None = None
    instances: between(1, 64) | None = None
    port: Port | None = None
    max_num_seqs: between(1, 4096) | None = None
    max_model_len: between(*INT_RANGES["max_model_len"]) | None = None   # vLLM's flags (fxctl.serve.vllm_flags)
    max_num_batched_tokens: between(*INT_RANGES["max_num_batched_tokens"]) | None = None
    gpu_memory_utilization: fraction() | None = None
    block_size: between(*INT_RANGES["block_size"]) | None = None
    kv_cache_dtype: checked(v.kv_cache_dtype) | None = None
    enforce_eager: Bool | None = None    # vLLM's --enforce-eager (no torch.compile)
    l1_bytes: size() | None = Field(None, validation_alias="l1_size")
    l2_bytes: size() | None = Field(None, validation_alias="l2_size")
    l2_dir: checked(v.mount_point) | None = None
    python: Str | None = None            # python interpreter of the serving environment
    state_dir: checked(v.mount_point) | None = None   # configs, logs and state on the hosts (/var/lib/fxctl/serve)
    router: RouterSpec | None = None
    metrics_address: one_of(*METRICS_ADDRESSES) | None = None   # the tier's and router's metrics: loopback or all

    @model_validator(mode="before")
    @classmethod
    def _sizes_by_their_keys(cls, data: Any) -> Any:
        """A file writes l1_size and l2_size; l1_bytes and l2_bytes are the fields' names in Python only."""
        if isinstance(data, dict):
            for name in ("l1_bytes", "l2_bytes"):
                if name in data:
                    raise refuse(f"unknown key; write {name.replace('bytes', 'size')} (a size such as 64G)", at=name)
        return data

    def set_fields(self) -> dict[str, Any]:
        """The fields the inventory set, by field name (l1_bytes, not l1_size)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


@shape
class MonitoringSpec:
    """monitoring: the array exporter `fxctl provision` runs on initiators (fxctl-array-exporter.service)."""

    exporter_address: checked(v.ip_address) = "127.0.0.1"   # 0.0.0.0 (or the host's) for a central Prometheus
    exporter_port: Port = 9105
    exporter_textfile: checked(v.textfile_path) | None = None   # also written for node-exporter's textfile collector


@shape
class Inventory:
    version: one_of(1)
    defaults: HostOptions = HostOptions()
    hosts: dict[Name, HostEntry]         # read as Host, with the name and `defaults` filled in
    groups: dict[Name, unique(Name)] = Field(default_factory=dict)
    arrays: tuple[ArraySpec, ...] = ()
    network: NetworkSpec | None = None
    serve: ServeSpec | None = None
    monitoring: MonitoringSpec = MonitoringSpec()
    lab: dict[Name, Any] = Field(default_factory=dict)  # facts written by fxctl lab
    path: Path = dataclasses.field(default=Path("<inventory>"), init=False)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        """Fill each host's unset keys from `defaults` (only valid defaults: their errors are reported once)."""
        if not (isinstance(data, dict) and isinstance(data.get("hosts"), dict) and data.get("defaults")):
            return data
        try:
            TypeAdapter(HostOptions).validate_python(data["defaults"])
        except ValidationError:
            return data
        hosts = {name: {**data["defaults"], **raw} if isinstance(raw, dict) else raw
                 for name, raw in data["hosts"].items()}
        return {**data, "hosts": hosts}

    @field_validator("hosts", mode="after")
    @classmethod
    def _named(cls, value: dict) -> dict[str, Host]:
        return {name: Host(name=name, **_fields(entry)) for name, entry in value.items()}

    def select(self, names_or_groups: list[str] | None = None) -> list[Host]:
        """Hosts by name, group or role; all hosts when nothing is asked. An unknown name is BadInput."""
        if not names_or_groups:
            return list(self.hosts.values())
        chosen: dict[str, Host] = {}
        for item in names_or_groups:
            names = self.groups.get(item) or [h.name for h in self.hosts.values() if item in h.roles]
            if item in self.hosts:
                names = [item]
            if not names and item not in self.groups:
                raise BadInput(f"no host, group or role is named '{item}'",
                               f"hosts: {', '.join(self.hosts)}" + (f"; groups: {', '.join(self.groups)}"
                                                                    if self.groups else ""))
            for name in names:
                chosen[name] = self.hosts[name]
        return list(chosen.values())


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}


def build_inventory(path: Path, data: Any) -> Inventory:
    """The validated inventory; raises pydantic's ValidationError (see fxctl.inventory.problems)."""
    inventory = TypeAdapter(Inventory).validate_python(data)
    object.__setattr__(inventory, "path", path)
    return inventory


def build_network(data: Any) -> NetworkSpec:
    return TypeAdapter(NetworkSpec).validate_python(data)
