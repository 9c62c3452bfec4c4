"""`fxctl provision --destroy`: the reverse order, refusing a busy mount, data kept unless --wipe."""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.engine.plan import Operation, Refused, Step, run_operation
from fxctl.facts.blockdev import DiskById, Mount, MountUsers
from fxctl.facts.files import FileContent
from fxctl.facts.md import MdDetail, MdExamine
from fxctl.facts.nvme_host import NvmeControllers
from fxctl.facts.nvmet import CONFIGFS, NvmetConfig
from fxctl.facts.system import FirstExisting
from fxctl.inventory.model import ArraySpec, Host
from fxctl.ops import md_exported
from fxctl.ops.files import ensure_no_line, without_managed_line
from fxctl.remote.command import write_file
from fxctl.ops.nvme_host import DISCOVERY_CONF
from fxctl.ops.nvmet import attr_write, sub_path
from fxctl.ops.nvmet_persist import CONFIG_PATH
from fxctl.provision import naming
from fxctl.provision.initiator import MDADM_CONF_CANDIDATES, arrays_of, layout, mdadm_conf_path
from fxctl.provision.target import TargetRecipe, resolve_drive
from fxctl.remote.command import sh


def ensure_unmounted(mount: str, mounted: dict | None, users: list[dict]) -> Operation:
    if mounted is None:
        return f"{mount} is not mounted"
    if users:
        held = ", ".join(f"{u['command']} (pid {u['pid']})" for u in users[:8])
        raise Refused(f"{mount} is busy: held by {held}; stop them first")
    yield sh("umount", mount)
    return None


def ensure_md_stopped(device: str, detail: dict | None, superblocks: dict[str, dict | None],
                      wipe: bool) -> Operation:
    """Stop the array; with --wipe also erase the md superblocks still on its members."""
    marked = [m for m, sb in superblocks.items() if sb] if wipe else []
    if detail is None and not marked:
        return f"{device} is not running" + (" and no member holds a superblock" if wipe else "")
    if detail is not None:
        yield sh("mdadm", "--stop", detail.get("device") or device)  # found by UUID when the link is gone
    if marked:
        yield sh("mdadm", "--zero-superblock", *marked)
    return None


def ensure_disconnected(nqn: str, controllers: list[dict]) -> Operation:
    if not any(c["nqn"] == nqn for c in controllers):
        return f"not connected to {nqn}"
    yield sh("nvme", "disconnect", "--nqn", nqn)
    return None


@dataclass
class InitiatorTeardown:
    arrays: tuple[ArraySpec, ...]
    wipe: bool = False

    def facts(self, host: Host):
        facts = {"controllers": NvmeControllers(), "links": DiskById(), "fstab": FileContent("/etc/fstab"),
                 "discovery": FileContent(DISCOVERY_CONF), "mdadm_conf_path": FirstExisting(MDADM_CONF_CANDIDATES),
                 "mdadm_conf:/etc/mdadm/mdadm.conf": FileContent("/etc/mdadm/mdadm.conf"),
                 "mdadm_conf:/etc/mdadm.conf": FileContent("/etc/mdadm.conf")}
        for array in arrays_of(self.arrays, host):
            facts[f"{array.name}:mount"] = Mount(array.mount)
            facts[f"{array.name}:users"] = MountUsers(array.mount)
            facts[f"{array.name}:md"] = MdDetail(naming.md_device(array), naming.md_uuid_mdadm(array))
            facts[f"{array.name}:examine"] = MdExamine(list(layout(array).members))
        return facts

    def plan(self, host: Host, facts: dict) -> list[Step]:
        conf_path = mdadm_conf_path(facts["mdadm_conf_path"])
        fstab, conf, discovery = facts["fstab"], facts[f"mdadm_conf:{conf_path}"], facts["discovery"]
        steps = []
        for array in arrays_of(self.arrays, host):
            plan, name, marker = layout(array), array.name, naming.marker(array)
            steps += [
                run_operation(f"{name}: unmount", ensure_unmounted(
                    array.mount, facts[f"{name}:mount"], facts[f"{name}:users"])),
                run_operation(f"{name}: fstab", ensure_no_line("/etc/fstab", marker, fstab)),
                run_operation(f"{name}: stop md", ensure_md_stopped(
                    plan.device, facts[f"{name}:md"], facts[f"{name}:examine"], self.wipe), destructive=self.wipe),
                run_operation(f"{name}: mdadm.conf", ensure_no_line(conf_path, marker, conf)),
                run_operation(f"{name}: disconnect", ensure_disconnected(array.nqn, facts["controllers"])),
                run_operation(f"{name}: autoconnect entry", ensure_no_path_lines(array, discovery)),
            ]
            for path_marker in naming.path_markers(array):
                discovery = without_managed_line(discovery, path_marker)
        return steps


def ensure_no_path_lines(array: ArraySpec, current: str | None) -> Operation:
    """discovery.conf keeps no line of the array's paths (also of paths the inventory no longer lists)."""
    wanted = current
    for marker in naming.path_markers(array):
        wanted = without_managed_line(wanted, marker)
    if current is None or wanted == current:
        return f"{DISCOVERY_CONF} has no {naming.marker(array)} line"
    yield write_file(DISCOVERY_CONF, wanted or "", "0644")
    return None


def ensure_unexported(array: ArraySpec, state: dict) -> Operation:
    """Unlinked from every port that exports it (also ports the inventory no longer names), then removed;
    a port left with no subsystem goes too."""
    sub = state["subsystems"].get(array.nqn)
    if sub is None:
        return f"{array.nqn} is not exported"
    linked = sorted((pid for pid, port in state["ports"].items() if array.nqn in port["subsystems"]), key=int)
    for pid in linked:
        yield sh("rm", f"{CONFIGFS}/ports/{pid}/subsystems/{array.nqn}")
    for nsid in sorted(sub["namespaces"], key=int):
        yield attr_write(f"{sub_path(array.nqn)}/namespaces/{nsid}/enable", 0)
        yield sh("rmdir", f"{sub_path(array.nqn)}/namespaces/{nsid}")
    for host in sub["allowed_hosts"]:
        yield sh("rm", f"{sub_path(array.nqn)}/allowed_hosts/{host}")
    yield sh("rmdir", sub_path(array.nqn))
    for pid in linked:
        if set(state["ports"][pid]["subsystems"]) <= {array.nqn}:
            yield sh("rmdir", f"{CONFIGFS}/ports/{pid}")
    used_elsewhere = {h for nqn, other in state["subsystems"].items() if nqn != array.nqn
                      for h in other["allowed_hosts"]}
    for host in sub["allowed_hosts"]:
        if host not in used_elsewhere:
            yield sh("rmdir", f"{CONFIGFS}/hosts/{host}")
    return None


def ensure_guard_after_destroy(conf_path: str, marker: str, conf: str | None, wipe: bool) -> Operation:
    """The target's `ARRAY <ignore>` line for a destroyed array (md_exported): it goes with --wipe, which
    erases the md superblocks it names; without --wipe the drives keep them (and the data), and the line
    keeps this host from assembling them at its next boot."""
    if not wipe:
        return f"{conf_path}: kept (the drives keep the array's md superblocks; --wipe removes both)"
    return (yield from ensure_no_line(conf_path, marker, conf))


def ensure_drives_wiped(array: ArraySpec, facts: dict) -> Operation:
    """Erase the signatures on the array's drives (--wipe: the inventory names them by serial or ID)."""
    marked = []
    for drive in array.drives:
        try:
            device = resolve_drive(drive, facts["disks"], facts["links"])
        except Refused:
            continue
        if facts["signatures"].get(facts["links"].get(device, device)):
            marked.append(device)
    if not marked:
        return "no signatures left on the drives"
    yield sh("wipefs", "--all", *marked)
    return None


@dataclass
class TargetTeardown:
    arrays: tuple[ArraySpec, ...]        # every array of the inventory
    remove: tuple[str, ...]              # names of the arrays being destroyed
    wipe: bool = False

    def facts(self, host: Host):
        base = TargetRecipe(self.arrays, {}, self.wipe).facts(host)
        base["persisted"] = FileContent(CONFIG_PATH)
        return base

    def plan(self, host: Host, facts: dict) -> list[Step]:
        steps = []
        conf_path = mdadm_conf_path(facts["mdadm_conf_path"])
        conf = facts.get(f"mdadm_conf:{conf_path}")
        guard = []
        for array in self.arrays:
            if array.target != host.name or array.name not in self.remove:
                continue
            steps.append(run_operation(f"{array.name}: unexport", ensure_unexported(array, facts["nvmet"])))
            if self.wipe:
                steps.append(run_operation(f"{array.name}: wipe drives", ensure_drives_wiped(array, facts),
                                           destructive=True))
            marker = md_exported.ignore_marker(naming.marker(array))
            guard.append(run_operation(f"{array.name}: not auto-assembled here",
                                       ensure_guard_after_destroy(conf_path, marker, conf, self.wipe)))
            if self.wipe:
                conf = without_managed_line(conf, marker)
        steps.append(run_operation("persisted exports", self.ensure_persisted_without(host, facts)))
        if guard:
            steps += guard
            steps.append(run_operation("initramfs", md_exported.ensure_initramfs_current(
                any(s.changes for s in guard), facts["initramfs"])))
        return steps

    def ensure_persisted_without(self, host: Host, facts: dict) -> Operation:
        import json
        current = facts["persisted"]
        if current is None:
            return f"{CONFIG_PATH} does not exist"
        document = json.loads(current)
        gone = {a.nqn for a in self.arrays if a.target == host.name and a.name in self.remove}
        kept = [s for s in document.get("subsystems", []) if s["nqn"] not in gone]
        if len(kept) == len(document.get("subsystems", [])):
            return f"{CONFIG_PATH} exports none of these arrays"
        hosts = sorted({h for s in kept for h in s.get("allowed_hosts", [])})
        ports = [dict(p, subsystems=[n for n in p["subsystems"] if n not in gone]) for p in document.get("ports", [])]
        document.update(subsystems=kept, hosts=[{"nqn": h} for h in hosts],
                        ports=[p for p in ports if p["subsystems"]])
        yield write_file(CONFIG_PATH, json.dumps(document, indent=2, sort_keys=True) + "\n", "0644")
        return None
