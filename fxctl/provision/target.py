"""The storage target's recipe: export each array's drives through kernel nvmet, persisted for boot."""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.engine.plan import Refused, Step, run_operation
from fxctl.facts.blockdev import BlockDevices, DiskById, Signatures
from fxctl.facts.files import FileContent
from fxctl.facts.md import InitramfsWithMdadm, MdArrays
from fxctl.facts.nvmet import NVMET_MODULES, NvmetConfig
from fxctl.facts.system import FirstExisting, IpAddresses, LoadedModules, RdmaDevices
from fxctl.facts.systemd import UnitEnabled
from fxctl.inventory.model import ArraySpec, Drive, Host
from fxctl.ops import md_exported, nvmet
from fxctl.ops.nvmet_persist import UNIT_NAME, ensure_persisted, persisted_files
from fxctl.ops.systemd import ensure_unit_enabled
from fxctl.provision import naming
from fxctl.provision.initiator import MDADM_CONF_CANDIDATES, mdadm_conf_path
from fxctl.remote.command import sh


def resolve_drive(drive: Drive, disks: dict, links: dict) -> str:
    """The drive's /dev/disk/by-id path (what nvmet exports); Refused with what exists otherwise."""
    if drive.by_id:
        if drive.by_id not in links:
            raise Refused(f"drive {drive.by_id} does not exist on this host")
        return drive.by_id
    matches = [path for path, disk in disks.items() if disk["serial"] == drive.serial]
    if not matches:
        serials = ", ".join(sorted(d["serial"] for d in disks.values() if d["serial"])) or "none"
        raise Refused(f"no drive with serial {drive.serial} (serials here: {serials})")
    named = sorted(link for link, target in links.items() if target == matches[0] and drive.serial in link
                   and not link.rsplit("/", 1)[-1].startswith(("nvme-eui.", "nvme-uuid.", "nvme-nvme.")))
    if not named:
        raise Refused(f"drive with serial {drive.serial} ({matches[0]}) has no /dev/disk/by-id name")
    return named[0]


def data_on(device: str, disks: dict, links: dict, signatures: dict) -> str | None:
    """What makes a drive look in use: a mount, partitions, holders, or a signature; None if blank."""
    path = links.get(device, device)
    disk = disks.get(path, {})
    if disk.get("mountpoint"):
        return f"it is mounted at {disk['mountpoint']}"
    if disk.get("children"):
        return f"it is in use by {', '.join(disk['children'])}"
    # blkid -p read the drive just now; lsblk's fstype is udev's cache, stale when the drive was written
    # without a uevent here (an initiator's mdadm --zero-superblock through nvmet): used only unprobed
    probe, cached = signatures.get(path) or {}, ({} if path in signatures else disk)
    if status := probe.get("PROBE_ERROR"):
        return f"blkid -p could not read its signatures (exit {status}; 8: more than one signature)"
    if pttype := probe.get("PTTYPE") or cached.get("pttype"):
        return f"it has a {pttype} partition table"
    if kind := probe.get("TYPE") or cached.get("fstype"):
        label = probe.get("LABEL") or cached.get("label")
        return f"it holds {kind}" + (f" (label {label})" if label else "")
    return None


@dataclass
class TargetRecipe:
    arrays: tuple[ArraySpec, ...]           # every array of the inventory (port ids are per target)
    hostnqns: dict[str, str]                # initiator host name -> its host NQN
    wipe: bool = False

    def mine(self, host: Host) -> list[ArraySpec]:
        return [a for a in self.arrays if a.target == host.name]

    def facts(self, host: Host):
        facts = {"modules": LoadedModules(NVMET_MODULES), "nvmet": NvmetConfig(), "disks": BlockDevices(),
                 "links": DiskById(), "signatures": Signatures(), "addresses": IpAddresses(),
                 "rdma": RdmaDevices(), "unit": UnitEnabled(UNIT_NAME), "md_arrays": MdArrays(),
                 "initramfs": InitramfsWithMdadm(), "mdadm_conf_path": FirstExisting(MDADM_CONF_CANDIDATES)}
        for path in MDADM_CONF_CANDIDATES[:2]:
            facts[f"mdadm_conf:{path}"] = FileContent(path)
        for path in persisted_files([]):
            facts[f"file:{path}"] = FileContent(path)
        return facts

    def export_spec(self, array: ArraySpec, facts: dict) -> nvmet.ExportSpec:
        namespaces = tuple(
            nvmet.NamespaceSpec(naming.nsid(i), resolve_drive(d, facts["disks"], facts["links"]),
                                naming.namespace_uuid(array, d)) for i, d in enumerate(array.drives))
        ports = tuple(nvmet.PortSpec(naming.port_id(array, path, self.arrays), path.address, path.port)
                      for path in array.listen_paths)
        return nvmet.ExportSpec(
            nqn=array.nqn, transport=array.transport, ports=ports,
            hosts=tuple(self.hostnqns[name] for name in array.initiators), namespaces=namespaces)

    def plan(self, host: Host, facts: dict) -> list[Step]:
        steps: list[Step] = self.plan_md_guard(host, facts) if self.mine(host) else []
        specs = []
        for array in self.mine(host):
            try:
                spec = self.export_spec(array, facts)
            except Refused as refusal:
                steps.append(Step.refuse(f"{array.name}: drives", str(refusal)))
                continue
            specs.append(spec)
            steps += self.plan_array(array, spec, facts)
        if specs:
            current = {path: facts[f"file:{path}"] for path in persisted_files(specs)}
            steps.append(run_operation("persist exports", ensure_persisted(specs, current)))
            steps.append(run_operation(f"enable {UNIT_NAME}",
                                       ensure_unit_enabled(UNIT_NAME, facts["unit"],
                                                           reload=steps[-1].changes)))
        return steps

    def plan_array(self, array: ArraySpec, spec: nvmet.ExportSpec, facts: dict) -> list[Step]:
        state = facts["nvmet"]
        name = array.name
        steps = [*[run_operation(f"{name}: network" + (f" (path {i + 1})" if array.multipath else ""),
                                 self.check_network(array, path.address, facts))
                   for i, path in enumerate(array.listen_paths)],
                 run_operation(f"{name}: modules", nvmet.ensure_modules(array.transport, facts["modules"]))]
        exported = {ns.get("device_path") for ns in
                    ((state["subsystems"].get(array.nqn) or {}).get("namespaces") or {}).values()}
        for ns in spec.namespaces:
            steps.append(run_operation(f"{name}: drive {ns.device.rsplit('/', 1)[-1]} is free",
                                       self.check_drive(array, ns.device, exported, facts),
                                       destructive=self.wipe))
        steps.append(run_operation(f"{name}: drives not assembled here", md_exported.release_exported(
            name, *self.exported_drives(array, spec, facts), facts["md_arrays"])))
        steps += [
            run_operation(f"{name}: host NQNs", nvmet.ensure_hosts(spec, state)),
            run_operation(f"{name}: subsystem", nvmet.ensure_subsystem(spec, state)),
            run_operation(f"{name}: allowed hosts", nvmet.ensure_allowed_hosts(spec, state)),
            *[run_operation(f"{name}: namespace {ns.nsid}", nvmet.ensure_namespace(spec, ns, state))
              for ns in spec.namespaces],
            run_operation(f"{name}: other namespaces", nvmet.ensure_no_stray_namespaces(spec, state)),
            *[run_operation(f"{name}: port" + (f" {want.port_id}" if array.multipath else ""),
                            nvmet.ensure_port(spec, want, state)) for want in spec.ports],
        ]
        return steps

    def exported_drives(self, array: ArraySpec, spec: nvmet.ExportSpec, facts: dict) -> tuple[dict, set]:
        """Kernel name -> exported path of the array's drives, and those whose md superblock is the array's."""
        drives, ours = {}, set()
        for ns in spec.namespaces:
            path = facts["links"].get(ns.device, ns.device)
            kernel = path.rsplit("/", 1)[-1]
            drives[kernel] = ns.device
            probe = facts["signatures"].get(path) or {}
            if probe.get("TYPE") == "linux_raid_member" and probe.get("UUID") == naming.md_uuid(array):
                ours.add(kernel)
        return drives, ours

    def plan_md_guard(self, host: Host, facts: dict) -> list[Step]:
        """An `ARRAY <ignore>` line per exported array in mdadm.conf, so that this host never assembles
        the initiators' arrays from the drives it exports (md_exported); the initramfs refreshed after."""
        path = mdadm_conf_path(facts["mdadm_conf_path"])
        current = facts.get(f"mdadm_conf:{path}")
        steps = []
        for array in self.mine(host):
            uuid, marker = naming.md_uuid_mdadm(array), naming.marker(array)
            steps.append(run_operation(f"{array.name}: not auto-assembled here",
                                       md_exported.ensure_not_auto_assembled(path, uuid, marker, current)))
            current = md_exported.with_ignore_line(uuid, marker, current)
        steps.append(run_operation("initramfs", md_exported.ensure_initramfs_current(
            any(s.changes for s in steps), facts["initramfs"])))
        return steps

    def check_network(self, array: ArraySpec, address: str, facts: dict):
        netdev = facts["addresses"].get(address)
        if netdev is None:
            raise Refused(f"listen address {address} is not configured on this host "
                          "(configure it, or run `fxctl net apply`)")
        if array.transport == "rdma" and not any(d["netdev"] == netdev for d in facts["rdma"]):
            raise Refused(f"no RDMA device on {netdev} for transport rdma (an RDMA NIC, or Soft-RoCE "
                          "through `fxctl net apply` with soft_roce: true; or use transport tcp)")
        return f"{address} is on {netdev}"
        yield  # a generator: checks only, never a command

    def check_drive(self, array: ArraySpec, device: str, exported: set, facts: dict):
        if device in exported:
            return "already exported by this array"
        probe = facts["signatures"].get(facts["links"].get(device, device)) or {}
        if probe.get("TYPE") == "linux_raid_member" and probe.get("UUID") == naming.md_uuid(array):
            return "holds this array's own md member (kept: the initiator assembles it again)"
        reason = data_on(device, facts["disks"], facts["links"], facts["signatures"])
        if reason is None:
            return "blank"
        if not self.wipe:
            raise Refused(f"{device}: {reason}; refusing to export it. Pass --wipe to erase it "
                          "(the inventory names it by serial or ID)")
        if busy := busy_drives(array, facts):
            raise Refused(f"--wipe erases all of {array.name}'s drives or none, and {'; '.join(busy)}: "
                          "nothing was wiped; release them first")
        yield sh("wipefs", "--all", device)
        return None


def busy_drives(array: ArraySpec, facts: dict) -> list[str]:
    """Each of the array's drives that a wipe would fail on (mounted, or held by md or dm), with why."""
    busy = []
    for drive in array.drives:
        try:
            device = resolve_drive(drive, facts["disks"], facts["links"])
        except Refused:
            continue
        disk = facts["disks"].get(facts["links"].get(device, device), {})
        held = ([f"mounted at {disk['mountpoint']}"] if disk.get("mountpoint") else []) + disk.get("held_by", [])
        if held:
            busy.append(f"{device} is in use: {', '.join(held)}")
    return busy
