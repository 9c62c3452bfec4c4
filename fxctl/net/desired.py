"""The desired network state of one host, from the inventory's `network:` section.

Interfaces name a netdev, an RDMA device or both; the one left out is found from `rdma -j link` on the
host (`resolve_interfaces`). The NIC driver picks how QoS is applied: iproute2 `dcb` (vendor-neutral,
the default), NVIDIA `mlnx_qos` + ECN sysfs (mlx5), Broadcom bnxt_re configfs (bnxt).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fxctl.errors import BadInput
from fxctl.inventory.model import InterfaceSpec, Inventory, NetworkSpec

DRIVER_OF_KERNEL_MODULE = {"mlx5_core": "mlx5", "bnxt_en": "bnxt"}
SOFT_ROCE_DEVICE = "rxe0"


@dataclass(frozen=True)
class Nic:
    """One interface of one host, resolved: netdev, RDMA device, and the QoS driver to use."""

    spec: InterfaceSpec
    driver: str              # dcb | mlx5 | bnxt
    kernel_driver: str | None = None

    @property
    def netdev(self) -> str:
        return self.spec.netdev  # type: ignore[return-value]

    @property
    def device(self) -> str | None:
        return self.spec.rdma_device


def qos_driver(configured: str, kernel_driver: str | None) -> str:
    """dcb, mlx5 or bnxt: as configured, or (auto) from the netdev's kernel driver."""
    if configured != "auto":
        return configured
    return DRIVER_OF_KERNEL_MODULE.get(kernel_driver or "", "dcb")


def roce_dscp(network: NetworkSpec) -> int:
    return network.roce_tos >> 2


def effective_dscp_map(network: NetworkSpec) -> list[tuple[int, int]]:
    """DSCP -> priority: the inventory's map plus the CNP's DSCP on its priority."""
    mapping = dict(network.dscp_map)
    mapping.setdefault(network.cnp_dscp, network.cnp_priority)
    return sorted(mapping.items())


def check_network(inventory: Inventory) -> NetworkSpec:
    """The network section, checked for what the schema cannot say; BadInput otherwise."""
    network = inventory.network
    if network is None:
        raise BadInput(f"{inventory.path} has no network: section", "add one (see examples/ or `fxctl lab inventory`)")
    for spec in network.interfaces:
        if spec.host not in inventory.hosts:
            raise BadInput(f"network.interfaces names host {spec.host}, which is not in hosts:")
        if not spec.netdev and not spec.rdma_device:
            raise BadInput(f"network.interfaces.{spec.host}: an interface needs netdev, rdma_device or both")
        if spec.soft_roce and not spec.netdev:
            raise BadInput(f"network.interfaces.{spec.host}: soft_roce needs the netdev to put rxe on")
    if network.ets and (len(network.ets) != 8 or sum(network.ets) != 100):
        raise BadInput(f"network.ets must be 8 shares (one per traffic class) summing to 100, not {list(network.ets)}")
    if network.pfc_priority not in {p for _, p in network.dscp_map}:
        raise BadInput(f"network.pfc_priority {network.pfc_priority} is no DSCP's priority in dscp_map",
                       "map the RoCE DSCP (roce_tos >> 2) to the PFC priority")
    return network


def interfaces_of(network: NetworkSpec, host: str) -> list[InterfaceSpec]:
    return [spec for spec in network.interfaces if spec.host == host]


def resolve_interfaces(specs: list[InterfaceSpec], links: list[dict] | None) -> list[InterfaceSpec]:
    """Fill in the netdev from the RDMA device (or the reverse) from `rdma -j link`; a Soft-RoCE interface
    with no device yet gets the name it will be created with."""
    links = links or []
    resolved = []
    taken = {link["device"] for link in links}   # names on the host, and those given here to earlier interfaces
    for spec in specs:
        if not spec.netdev:
            bound = [link["netdev"] for link in links if link["device"] == spec.rdma_device and link["netdev"]]
            spec = replace(spec, netdev=bound[0] if bound else None)
        bound = [link["device"] for link in links if link["netdev"] == spec.netdev]
        if spec.soft_roce and bound and spec.rdma_device not in bound:
            spec = replace(spec, rdma_device=bound[0])  # an RDMA device on the netdev already: that one counts
        if not spec.rdma_device:
            if bound:
                spec = replace(spec, rdma_device=bound[0])
            elif spec.soft_roce:
                name = next(f"rxe{i}" for i in range(64) if f"rxe{i}" not in taken)
                spec = replace(spec, rdma_device=name)
        if spec.rdma_device:
            taken.add(spec.rdma_device)
        resolved.append(spec)
    return resolved


@dataclass(frozen=True)
class Knobs:
    """The QoS values every interface of the network gets."""

    pfc_priority: int
    dscp_map: tuple[tuple[int, int], ...]
    trust: str
    ets: tuple[int, ...]
    ecn: bool
    roce_dscp: int
    cnp_dscp: int
    cnp_priority: int
    roce_tos: int
    mtu: int
    global_pause: bool

    @classmethod
    def of(cls, network: NetworkSpec) -> Knobs:
        return cls(pfc_priority=network.pfc_priority, dscp_map=tuple(effective_dscp_map(network)),
                   trust=network.trust, ets=tuple(network.ets), ecn=network.ecn, roce_dscp=roce_dscp(network),
                   cnp_dscp=network.cnp_dscp, cnp_priority=network.cnp_priority, roce_tos=network.roce_tos,
                   mtu=network.mtu, global_pause=network.global_pause)
