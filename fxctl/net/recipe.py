"""The per-host recipe of `fxctl net apply`: facts to read, and the steps that follow from them.

Per interface, in order: link (MTU, up, address, global pause), the RDMA device (Soft-RoCE when asked),
QoS through the interface's driver (dcb | mlx5 | bnxt), RDMA-CM defaults; then the boot-time unit that
re-applies the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fxctl.engine.plan import Refused, Step, run_operation
from fxctl.facts.files import FileContent
from fxctl.facts.net import ConfigValues, DcbShow, Link, MlnxQos, Pause, RdmaCmDefaults, RdmaLinks
from fxctl.facts.system import IpAddresses
from fxctl.facts.systemd import UnitEnabled
from fxctl.inventory.model import Host
from fxctl.net.desired import Knobs, Nic
from fxctl.net.persist import UNIT_NAME, ensure_persisted, persisted_files
from fxctl.ops import net as ops
from fxctl.ops.systemd import ensure_unit_enabled


def ecn_knobs(priority: int) -> tuple[str, ...]:
    return (f"roce_np/enable/{priority}", f"roce_rp/enable/{priority}")


BNXT_CC_FILES = ("ecn_enable", "roce_prio", "roce_dscp", "cnp_prio", "cnp_dscp")


@dataclass
class NetRecipe:
    knobs: Knobs
    nics: dict[str, list[Nic]] = field(default_factory=dict)     # host name -> its interfaces

    def facts(self, host: Host) -> dict:
        facts: dict = {"addresses": IpAddresses(), "rdma": RdmaLinks(), "rdma_cm": RdmaCmDefaults(),
                       "unit": UnitEnabled(UNIT_NAME)}
        for nic in self.nics.get(host.name, []):
            nd = nic.netdev
            facts.update({f"{nd}:link": Link(nd), f"{nd}:pause": Pause(nd)})
            for obj in ("pfc", "app", "apptrust") + (("ets",) if self.knobs.ets else ()):
                facts[f"{nd}:{obj}"] = DcbShow(nd, obj)
            if nic.driver == "mlx5":
                facts[f"{nd}:mlnx_qos"] = MlnxQos(nd)
                facts[f"{nd}:ecn"] = ConfigValues(f"/sys/class/net/{nd}/ecn", ecn_knobs(self.knobs.pfc_priority))
            if nic.driver == "bnxt" and nic.device:
                folder = f"{ops.BNXT_RE}/{nic.device}"
                facts[f"{nd}:bnxt_cc"] = ConfigValues(f"{folder}/ports/1/cc", BNXT_CC_FILES, make=folder)
        for path in persisted_files(self.knobs, []):
            facts[f"file:{path}"] = FileContent(path)
        return facts

    def plan(self, host: Host, facts: dict) -> list[Step]:
        steps: list[Step] = []
        nics = self.nics.get(host.name, [])
        for nic in nics:
            steps += self.plan_nic(nic, facts)
        if nics:
            current = {path: facts[f"file:{path}"] for path in persisted_files(self.knobs, nics)}
            steps.append(run_operation("boot: desired state", ensure_persisted(self.knobs, nics, current)))
            steps.append(run_operation(f"boot: enable {UNIT_NAME}",
                                       ensure_unit_enabled(UNIT_NAME, facts["unit"], reload=steps[-1].changes)))
        return steps

    def plan_nic(self, nic: Nic, facts: dict) -> list[Step]:
        nd, k = nic.netdev, self.knobs
        link = facts[f"{nd}:link"]
        steps = [run_operation(f"{nd}: mtu", ops.ensure_mtu(nd, k.mtu, link)),
                 run_operation(f"{nd}: up", ops.ensure_link_up(nd, link)),
                 run_operation(f"{nd}: address", ops.ensure_address(nd, nic.spec.address, facts["addresses"])),
                 run_operation(f"{nd}: global pause",
                               ops.ensure_global_pause(nd, k.global_pause, facts[f"{nd}:pause"]))]
        steps.append(run_operation(f"{nd}: rdma device", self.rdma_device(nic, facts["rdma"])))
        steps += self.plan_qos(nic, facts)
        if nic.device:
            steps.append(run_operation(f"{nic.device}: rdma_cm defaults",
                                       ops.ensure_roce_defaults(nic.device, 1, k.roce_tos, facts["rdma_cm"])))
        return steps

    @staticmethod
    def rdma_device(nic: Nic, links: list[dict] | None):
        if nic.spec.soft_roce:
            return (yield from ops.ensure_soft_roce(nic.netdev, nic.device or "rxe0", links))
        bound = sorted({link["device"] for link in links or [] if link["netdev"] == nic.netdev})
        if not bound:
            raise Refused(f"no RDMA device on {nic.netdev}: an RDMA NIC (driver loaded), or soft_roce: true "
                          "in the inventory for Soft-RoCE")
        return f"{', '.join(bound)} on {nic.netdev}"

    def plan_qos(self, nic: Nic, facts: dict) -> list[Step]:
        nd, k = nic.netdev, self.knobs
        mlnx = facts.get(f"{nd}:mlnx_qos") if nic.driver == "mlx5" else None
        if mlnx is not None:
            steps = [run_operation(f"{nd}: qos (mlnx_qos)",
                                   ops.ensure_mlx5_qos(nd, k.trust, k.pfc_priority, list(k.dscp_map), mlnx))]
        else:  # dcb: the default, and mlx5/bnxt without their vendor tool
            steps = [run_operation(f"{nd}: pfc", ops.ensure_dcb_pfc(nd, k.pfc_priority, facts[f"{nd}:pfc"])),
                     run_operation(f"{nd}: dscp map", ops.ensure_dcb_app(nd, list(k.dscp_map), facts[f"{nd}:app"])),
                     run_operation(f"{nd}: trust", ops.ensure_dcb_trust(nd, k.trust, facts[f"{nd}:apptrust"]))]
        if k.ets:
            steps.append(run_operation(f"{nd}: ets", ops.ensure_dcb_ets(nd, list(k.ets), facts[f"{nd}:ets"])))
        steps.append(self.ecn_step(nic, facts))
        return steps

    def ecn_step(self, nic: Nic, facts: dict) -> Step:
        nd, k = nic.netdev, self.knobs
        if nic.driver == "mlx5":
            return run_operation(f"{nd}: ecn", ops.ensure_mlx5_ecn(nd, k.pfc_priority, k.ecn, facts[f"{nd}:ecn"]))
        if nic.driver == "bnxt" and nic.device:
            wanted = ops.bnxt_cc_wanted(k.pfc_priority, k.roce_dscp, k.cnp_priority, k.cnp_dscp, k.ecn)
            return run_operation(f"{nd}: ecn (bnxt_re cc)",
                                 ops.ensure_bnxt_cc(nic.device, wanted, facts[f"{nd}:bnxt_cc"]))
        kernel = nic.kernel_driver or "unknown"
        reason = (ops.unsupported(f"ECN/DCQCN on {nd}: driver {kernel} has no knob fxctl knows "
                                  "(mlx5 and bnxt_re have)") if k.ecn else "ECN not asked")
        return Step(f"{nd}: ecn", [], reason)
