"""The initiator's recipes: identity, then fabric connections, then md RAID0 + XFS + mount.

They run as separate rounds because each needs the facts the previous one creates: the target needs the
initiator's host NQN; the array needs the namespaces that connecting makes appear.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from fxctl.engine.plan import Refused, Step, run_operation
from fxctl.facts.blockdev import DiskById, Mount, Probe
from fxctl.facts.files import FileContent
from fxctl.facts.md import MdDetail, MdExamine, MdScan, MemberHolders
from fxctl.facts.nvme_host import NvmeConnectOptions, NvmeControllers, NvmeMultipath, UuidMembers
from fxctl.facts.system import FirstExisting, IpAddresses, LoadedModules, Realpath
from fxctl.facts.systemd import UnitEnabled
from fxctl.inventory.model import ArraySpec, Host, Listen
from fxctl.ops import multipath, nvme_host, nvme_persist, raid
from fxctl.ops.systemd import ensure_unit_enabled
from fxctl.provision import naming

AUTOCONNECT = "nvmf-autoconnect.service"
MDADM_CONF_CANDIDATES = ("/etc/mdadm/mdadm.conf", "/etc/mdadm.conf", "/etc/mdadm")


def arrays_of(arrays: tuple[ArraySpec, ...], host: Host) -> list[ArraySpec]:
    """The arrays this host is the initiator of."""
    return [a for a in arrays if host.name in a.initiators]


def connect_spec(array: ArraySpec, path: Listen | None = None, addresses: dict[str, str] | None = None
                 ) -> nvme_host.ConnectSpec:
    """How this host connects one path of the array (the first when none is named). A path with an
    `interface` is bound to it: rdma through the host's own address on it (from `addresses`, the
    IpAddresses fact), tcp through the interface itself."""
    path = path or array.listen_paths[0]
    options = tuple((key, getattr(array.connect, key)) for key in nvme_host.CONNECT_OPTIONS)
    host_traddr = host_iface = None
    if path.interface and array.transport == "tcp":
        host_iface = path.interface
    elif path.interface:
        host_traddr = own_address(path, addresses or {})
    return nvme_host.ConnectSpec(nqn=array.nqn, transport=array.transport, address=path.address,
                                 port=path.port, options=options,
                                 members=tuple(naming.member_path(array, d) for d in array.drives),
                                 host_traddr=host_traddr, host_iface=host_iface, label=path.label)


def own_address(path: Listen, addresses: dict[str, str]) -> str:
    """The host's address on the path's interface, of the target address's family; Refused if it has none."""
    family = ipaddress.ip_address(path.address).version
    mine = sorted(a for a, dev in addresses.items() if dev == path.interface
                  and ipaddress.ip_address(a.partition("%")[0]).version == family)
    if not mine:
        raise Refused(f"interface {path.interface} (the path to {path.address}) has no IPv{family} address on "
                      "this host: configure it (or `fxctl net apply`), or name another interface")
    return mine[0]


def layout(array: ArraySpec) -> raid.ArrayLayout:
    return raid.ArrayLayout(
        name=array.raid_name, device=naming.md_device(array),
        members=tuple(naming.member_path(array, d) for d in array.drives), chunk_bytes=array.chunk_bytes,
        metadata=array.metadata, md_uuid=naming.md_uuid_mdadm(array), fs_uuid=naming.xfs_uuid(array),
        fs_label=array.fs_label, mount=array.mount, mount_options=array.mount_options,
        marker=naming.marker(array))


def mdadm_conf_path(found: str | None) -> str:
    if found in (None, "/etc/mdadm"):
        return "/etc/mdadm/mdadm.conf" if found else "/etc/mdadm.conf"
    return found


class IdentityRecipe:
    def facts(self, host: Host):
        return {"hostnqn": FileContent(nvme_host.HOSTNQN_PATH), "hostid": FileContent(nvme_host.HOSTID_PATH)}

    def plan(self, host: Host, facts: dict) -> list[Step]:
        return [run_operation("host NQN and ID", nvme_host.ensure_identity(
            host.hostnqn, host.hostid, facts["hostnqn"], facts["hostid"]))]


@dataclass
class ConnectRecipe:
    arrays: tuple[ArraySpec, ...]

    def facts(self, host: Host):
        return {"modules": LoadedModules(("nvme_fabrics", "nvme_rdma", "nvme_tcp")),
                "controllers": NvmeControllers(), "members": UuidMembers(),
                "discovery": FileContent(nvme_host.DISCOVERY_CONF), "autoconnect": UnitEnabled(AUTOCONNECT),
                "options": NvmeConnectOptions(), "multipath": NvmeMultipath(), "addresses": IpAddresses()}

    def plan(self, host: Host, facts: dict) -> list[Step]:
        steps = []
        discovery = facts["discovery"]
        for array in arrays_of(self.arrays, host):
            timeouts = {k: getattr(array.connect, k) for k in nvme_host.SYSFS_OPTIONS}
            steps.append(run_operation(f"{array.name}: modules",
                                       nvme_host.ensure_modules(array.transport, facts["modules"])))
            if array.multipath:
                steps.append(run_operation(f"{array.name}: native multipath",
                                           multipath.ensure_enabled(facts["multipath"])))
            for index, path in enumerate(array.listen_paths):
                name = f"{array.name}: " + (f"path {index + 1} ({path.label}): " if array.multipath else "")
                marker = naming.path_marker(array, index)
                try:
                    spec, unapplied = nvme_host.supported(connect_spec(array, path, facts["addresses"]),
                                                          facts["options"])
                except Refused as refusal:
                    steps.append(Step.refuse(f"{name}interface", str(refusal)))
                    continue
                steps += [
                    run_operation(f"{name}connect options", nvme_host.check_applicable(spec, unapplied)),
                    run_operation(f"{name}connect", nvme_host.ensure_connected(
                        spec, facts["controllers"], facts["members"])),
                    run_operation(f"{name}path-loss timeouts", nvme_host.ensure_timeouts(
                        spec, timeouts, facts["controllers"])),
                    run_operation(f"{name}autoconnect entry", nvme_host.ensure_autoconnect(spec, marker, discovery)),
                ]
                discovery = nvme_host.with_autoconnect_line(spec, marker, discovery)
            if array.multipath:
                steps.append(run_operation(f"{array.name}: iopolicy", self.iopolicy(array, facts["multipath"])))
        if steps:
            steps.append(run_operation(f"enable {AUTOCONNECT}", ensure_unit_enabled(AUTOCONNECT, facts["autoconnect"])))
        return steps

    @staticmethod
    def iopolicy(array: ArraySpec, found: dict):
        policy, why = multipath.iopolicy_for(array.connect.iopolicy, found.get("kernel", ""))
        return (yield from multipath.ensure_iopolicy(array.nqn, policy, why, found))


def boot_entry(array: ArraySpec, kernel: str) -> dict:
    """What the boot unit re-applies for one array: its timeouts, its paths' count and (multipath) iopolicy."""
    entry: dict = {"timeouts": {k: getattr(array.connect, k) for k in nvme_host.SYSFS_OPTIONS}}
    if array.multipath:
        try:
            entry["iopolicy"] = multipath.iopolicy_for(array.connect.iopolicy, kernel)[0]
        except Refused:
            pass    # the connect round refuses this array already
        entry["paths"] = len(array.listen_paths)
    return entry


@dataclass
class BootTimeoutsRecipe:
    """The path-loss timeouts come back after a reboot: fxctl-nvme-timeouts.service writes them to sysfs
    after nvmf-autoconnect (which cannot pass ctrl_loss_tmo -1 or fast_io_fail_tmo with nvme-cli 2.3)."""

    arrays: tuple[ArraySpec, ...]

    def facts(self, host: Host):
        facts = {path: FileContent(path) for path in (nvme_persist.CONFIG_PATH, nvme_persist.SCRIPT_PATH,
                                                      nvme_persist.UNIT_PATH)}
        return {**facts, "enabled": UnitEnabled(nvme_persist.UNIT_NAME), "multipath": NvmeMultipath()}

    def plan(self, host: Host, facts: dict) -> list[Step]:
        kernel = (facts.get("multipath") or {}).get("kernel", "")
        timeouts = {a.nqn: boot_entry(a, kernel) for a in arrays_of(self.arrays, host)}
        if not timeouts:
            return []
        unit = nvme_persist.persisted_files(timeouts)[nvme_persist.UNIT_PATH][0]
        unit_changed = facts[nvme_persist.UNIT_PATH] != unit
        return [run_operation("path-loss timeouts at boot", nvme_persist.ensure_persisted(timeouts, facts)),
                run_operation(f"enable {nvme_persist.UNIT_NAME}", ensure_unit_enabled(
                    nvme_persist.UNIT_NAME, facts["enabled"], reload=unit_changed))]


@dataclass
class RaidRecipe:
    """md RAID0 over the namespaces: created when blank, assembled again when it is this array's own."""

    arrays: tuple[ArraySpec, ...]
    wipe: bool = False

    def facts(self, host: Host):
        facts = {"links": DiskById(), "running": MdScan()}
        for array in arrays_of(self.arrays, host):
            plan = layout(array)
            facts[f"{array.name}:md"] = MdDetail(plan.device, plan.md_uuid)
            facts[f"{array.name}:examine"] = MdExamine(list(plan.members))
            facts[f"{array.name}:holders"] = MemberHolders(list(plan.members))
        return facts

    def plan(self, host: Host, facts: dict) -> list[Step]:
        return [run_operation(f"{array.name}: md raid0", raid.ensure_md(
            layout(array), facts[f"{array.name}:md"], facts[f"{array.name}:examine"], facts["links"],
            self.wipe, facts["running"], facts[f"{array.name}:holders"]), destructive=self.wipe)
            for array in arrays_of(self.arrays, host)]


@dataclass
class FilesystemRecipe:
    """XFS on the array, mounted, and the mdadm.conf and fstab lines that bring it back at boot."""

    arrays: tuple[ArraySpec, ...]
    wipe: bool = False

    def facts(self, host: Host):
        facts = {"fstab": FileContent("/etc/fstab"), "mdadm_conf_path": FirstExisting(MDADM_CONF_CANDIDATES),
                 "mdadm_conf:/etc/mdadm/mdadm.conf": FileContent("/etc/mdadm/mdadm.conf"),
                 "mdadm_conf:/etc/mdadm.conf": FileContent("/etc/mdadm.conf")}
        for array in arrays_of(self.arrays, host):
            plan = layout(array)
            facts[f"{array.name}:md_path"] = Realpath(plan.device)
            facts[f"{array.name}:probe"] = Probe(plan.device)
            facts[f"{array.name}:mount"] = Mount(plan.mount)
        return facts

    def plan(self, host: Host, facts: dict) -> list[Step]:
        conf_path = mdadm_conf_path(facts["mdadm_conf_path"])
        fstab, mdadm_conf = facts["fstab"], facts[f"mdadm_conf:{conf_path}"]
        steps: list[Step] = []
        for array in arrays_of(self.arrays, host):
            plan = layout(array)
            probe = facts[f"{array.name}:probe"]
            steps += [
                run_operation(f"{array.name}: xfs", raid.ensure_filesystem(plan, probe, self.wipe),
                              destructive=self.wipe),
                run_operation(f"{array.name}: mount", raid.ensure_mounted(
                    plan, facts[f"{array.name}:mount"], facts[f"{array.name}:md_path"])),
                run_operation(f"{array.name}: mdadm.conf", raid.ensure_mdadm_conf(plan, conf_path, mdadm_conf)),
                run_operation(f"{array.name}: fstab", raid.ensure_fstab(plan, fstab)),
            ]
            fstab, mdadm_conf = raid.with_fstab_line(plan, fstab), raid.with_mdadm_line(plan, mdadm_conf)
        return steps
