"""NVMe native multipath (issue 31): arrays with several paths in the inventory, a target port per path,
a connection per path bound to its interface, md on the heads, the I/O policy, and a path that is down
reported as degraded and left alone. Plans from parsed fact outputs; the lab drills do it for real."""

from __future__ import annotations

import json
import runpy

import pytest

from fxctl import data
from fxctl.engine.plan import Refused, run_operation
from fxctl.errors import BadInput
from fxctl.facts.nvme_host import NvmeControllers, NvmeMultipath
from fxctl.inventory import load_inventory_text
from fxctl.lab.topology import LabSpec, plan_lab
from fxctl.ops import multipath, nvme_persist
from fxctl.ops.nvmet_persist import nvmetcli_json
from fxctl.provision import naming
from fxctl.provision.initiator import BootTimeoutsRecipe, ConnectRecipe, layout
from fxctl.provision.target import TargetRecipe
from fxctl.provision.teardown import ensure_unexported
from fxctl.provision.verify import paths_check

NQN = "nqn.2026-11.io.example:kv"
HOSTS = """
version: 1
hosts:
  t1: {address: 10.0.0.1, roles: [target]}
  i1:
    address: 10.0.0.2
    roles: [initiator]
    hostnqn: "nqn.2014-08.org.nvmexpress:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427"
arrays:
  - name: kv
    target: t1
    nqn: nqn.2026-11.io.example:kv
"""
TAIL = """    drives: [{serial: S1}, {serial: S2}]
    initiators: [i1]
    filesystem: {mount: /mnt/kv}
"""
TWO_PATHS = HOSTS + """    paths:
      - {address: 10.99.0.1, interface: eth1}
      - {address: 10.99.1.1, interface: eth2}
""" + TAIL
ADDRESSES = {"10.99.0.2": "eth1", "10.99.1.2": "eth2", "10.0.2.15": "eth0"}
MULTIPATH_ON = "multipath\tY\nkernel\t6.1.0-41-amd64\n"


def inventory(text: str = TWO_PATHS):
    return load_inventory_text(text, "inv.yaml")


def controller_line(name: str, address: str, state: str, ana: str = "") -> str:
    return f"{name}\t{NQN}\t{state}\trdma\ttraddr={address},trsvcid=4420\toff\t2\t5\t{ana}\n"


def connect_plan(controllers: str, multipath_out: str = MULTIPATH_ON, addresses=None, present=True,
                 discovery: str | None = None):
    inv = inventory()
    recipe, host = ConnectRecipe(inv.arrays), inv.hosts["i1"]
    members = list(layout(inv.arrays[0]).members) if present else []
    facts = {"modules": ["nvme_fabrics", "nvme_rdma"], "controllers": NvmeControllers().parse(controllers),
             "members": members, "discovery": discovery, "autoconnect": "enabled",
             "options": ["--ctrl-loss-tmo", "--keep-alive-tmo", "--nr-io-queues", "--queue-size",
                         "--reconnect-delay", "--tos", "--fast_io_fail_tmo", "--host-traddr"],
             "multipath": NvmeMultipath().parse(multipath_out),
             "addresses": ADDRESSES if addresses is None else addresses}
    return {s.name: s for s in recipe.plan(host, facts)}


def commands(step) -> list[str]:
    return [c.masked() for c in step.commands]


def test_an_array_lists_one_listen_or_two_paths_never_both(tmp_path):
    array = inventory().arrays[0]
    assert array.multipath and [p.label for p in array.listen_paths] == ["10.99.0.1:4420 via eth1",
                                                                          "10.99.1.1:4420 via eth2"]
    one = inventory(HOSTS + "    listen: {address: 10.99.0.1}\n" + TAIL).arrays[0]
    assert not one.multipath and one.listen_paths[0].address == "10.99.0.1"
    cases = {
        "    listen: {address: 10.99.0.1}\n    paths: [{address: 10.99.1.1}, {address: 10.99.2.1}]\n":
            "give exactly one of: listen (one path), paths (two or more: native multipath) (found both)",
        "": "give exactly one of: listen",
        "    paths: [{address: 10.99.1.1}]\n": "needs at least 2 item(s)",
        "    paths: [{address: 10.99.1.1}, {address: 10.99.1.1}]\n": "10.99.1.1:4420 is listed twice",
        "    paths: [{address: 10.99.1.1, interface: 'eth 1'}, {address: 10.99.2.1}]\n": "network interface name",
    }
    for text, message in cases.items():
        with pytest.raises(BadInput) as raised:
            load_inventory_text(HOSTS + text + TAIL, "inv.yaml")
        assert message in str(raised.value), (text, str(raised.value))
        assert "inv.yaml:" in str(raised.value)


def test_the_target_exports_the_subsystem_on_a_port_per_path_and_persists_both():
    inv = inventory()
    recipe = TargetRecipe(inv.arrays, {"i1": inv.hosts["i1"].hostnqn})
    array = inv.arrays[0]
    disks = {"/dev/nvme0n1": {"serial": "S1"}, "/dev/nvme1n1": {"serial": "S2"}}
    links = {"/dev/disk/by-id/nvme-QEMU_S1": "/dev/nvme0n1", "/dev/disk/by-id/nvme-QEMU_S2": "/dev/nvme1n1"}
    spec = recipe.export_spec(array, {"disks": disks, "links": links})
    assert [(p.port_id, p.address, p.port) for p in spec.ports] == [(1, "10.99.0.1", 4420), (2, "10.99.1.1", 4420)]
    document = json.loads(nvmetcli_json([spec]))
    assert [(p["portid"], p["addr"]["traddr"], p["subsystems"]) for p in document["ports"]] == [
        (1, "10.99.0.1", [NQN]), (2, "10.99.1.1", [NQN])]
    state = {"hosts": [], "subsystems": {NQN: {"attrs": {}, "allowed_hosts": [], "namespaces": {"1": {}}}},
             "ports": {"1": {"addr": {}, "subsystems": [NQN]}, "2": {"addr": {}, "subsystems": [NQN]},
                       "3": {"addr": {}, "subsystems": [NQN, "nqn.other"]}}}
    removed = commands(run_operation("unexport", ensure_unexported(array, state)))
    assert [c for c in removed if "/ports/" in c] == [
        f"rm /sys/kernel/config/nvmet/ports/{p}/subsystems/{NQN}" for p in (1, 2, 3)] + [
        "rmdir /sys/kernel/config/nvmet/ports/1", "rmdir /sys/kernel/config/nvmet/ports/2"], removed


def test_a_bare_initiator_connects_each_path_bound_to_its_interface_then_sets_the_iopolicy():
    steps = connect_plan("", present=False)
    first = commands(steps["kv: path 1 (10.99.0.1:4420 via eth1): connect"])
    second = commands(steps["kv: path 2 (10.99.1.1:4420 via eth2): connect"])
    assert "--traddr 10.99.0.1" in first[0] and "--host-traddr 10.99.0.2" in first[0]
    assert "--traddr 10.99.1.1" in second[0] and "--host-traddr 10.99.1.2" in second[0]
    assert "round-robin" in commands(steps["kv: iopolicy"])[0]   # Linux 6.1 has no queue-depth
    assert steps["kv: native multipath"].reason.startswith("native multipath is on")
    lines = [c for c in commands(steps["kv: path 2 (10.99.1.1:4420 via eth2): autoconnect entry"])]
    assert "fxctl:kv:path2" in " ".join(lines)
    names = list(steps)
    assert names.index("kv: iopolicy") > names.index("kv: path 2 (10.99.1.1:4420 via eth2): connect")


def test_the_autoconnect_lines_of_both_paths_converge():
    # each path's line is written by its own step, in order; a plan over the file they leave changes nothing
    # (the first path's line was removed and appended after the second's, so every run rewrote both and
    # provision failed "not converged" on a real two-path lab)
    header = "# Used for extracting default parameters for discovery\n"
    first = connect_plan("", present=False, discovery=header)
    writes = [s.commands[0] for n, s in first.items() if n.endswith("autoconnect entry")]
    assert len(writes) == 2
    printf = writes[-1].parts[0].parts[0].parts[0]      # write_file: printf '%s' CONTENT > tmp && chmod && mv
    left = printf.parts[2]                              # the file once both steps ran
    assert left.startswith(header) and left.index("# fxctl:kv\n") < left.index("# fxctl:kv:path2")
    again = connect_plan("", present=False, discovery=left)
    assert [n for n, s in again.items() if n.endswith("autoconnect entry") and s.commands] == []


def test_one_path_down_is_degraded_named_and_nothing_is_disconnected():
    both = controller_line("nvme0", "10.99.0.1", "live", "nvme0c0n1=optimized nvme0c0n2=optimized") + \
        controller_line("nvme1", "10.99.1.1", "connecting")
    steps = connect_plan(both, MULTIPATH_ON + f"subsystem\tnvme-subsys0\t{NQN}\tround-robin\n")
    down = steps["kv: path 2 (10.99.1.1:4420 via eth2): connect"]
    assert "degraded: the path to 10.99.1.1:4420 via eth2 is down (nvme1 connecting)" in down.refusal
    assert not any(c for s in steps.values() for c in commands(s) if "disconnect" in c)
    healthy = steps["kv: path 1 (10.99.0.1:4420 via eth1): connect"]
    assert not healthy.commands and "ANA optimized" in healthy.reason


def test_a_dead_path_is_replaced_without_touching_the_live_one():
    both = controller_line("nvme0", "10.99.0.1", "live") + controller_line("nvme1", "10.99.1.1", "dead")
    steps = connect_plan(both, MULTIPATH_ON + f"subsystem\tnvme-subsys0\t{NQN}\tround-robin\n")
    replaced = commands(steps["kv: path 2 (10.99.1.1:4420 via eth2): connect"])
    assert replaced[0] == "nvme disconnect --device nvme1" and replaced[1].startswith("nvme connect")
    assert not steps["kv: iopolicy"].commands


def test_multipath_off_or_an_interface_without_address_is_refused():
    steps = connect_plan("", "multipath\tN\nkernel\t6.1.0\n", present=False)
    assert "native NVMe multipath is off" in steps["kv: native multipath"].refusal
    steps = connect_plan("", addresses={"10.99.0.2": "eth1"}, present=False)
    assert "interface eth2 (the path to 10.99.1.1) has no IPv4 address" in \
        steps["kv: path 2 (10.99.1.1:4420 via eth2): interface"].refusal


def test_iopolicy_default_follows_the_kernel_and_an_impossible_choice_is_refused():
    assert multipath.iopolicy_for(None, "6.12.9-amd64") == ("queue-depth", "the default")
    assert multipath.iopolicy_for(None, "6.1.0-41-amd64")[0] == "round-robin"
    assert multipath.iopolicy_for("numa", "6.1.0")[0] == "numa"
    with pytest.raises(Refused, match="queue-depth needs Linux 6.11"):
        multipath.iopolicy_for("queue-depth", "6.1.0-41-amd64")


def test_facts_read_ana_states_and_subsystem_policies():
    (found,) = NvmeControllers().parse(controller_line("nvme1", "10.99.1.1", "live", "nvme0c1n1=optimized "))
    assert found["ana"] == {"nvme0c1n1": "optimized"}
    parsed = NvmeMultipath().parse(MULTIPATH_ON + f"subsystem\tnvme-subsys0\t{NQN}\tnuma\n")
    assert parsed == {"enabled": True, "kernel": "6.1.0-41-amd64",
                      "subsystems": {NQN: {"name": "nvme-subsys0", "iopolicy": "numa"}}}
    assert NvmeMultipath().parse("multipath\t\nkernel\t6.1\n")["enabled"] is None


def test_verify_names_the_degraded_path():
    array = inventory().arrays[0]
    ana = "nvme0c0n1=optimized nvme0c0n2=optimized"
    healthy = NvmeControllers().parse(controller_line("nvme0", "10.99.0.1", "live", ana)
                                      + controller_line("nvme1", "10.99.1.1", "live", ana.replace("c0", "c1")))
    name, ok, detail = paths_check(array, healthy)
    assert ok and "path 2 10.99.1.1:4420 via eth2: nvme1 live (ANA optimized on 2 namespaces)" in detail
    down = NvmeControllers().parse(controller_line("nvme0", "10.99.0.1", "live", ana)
                                   + controller_line("nvme1", "10.99.1.1", "connecting"))
    name, ok, detail = paths_check(array, down)
    assert not ok and "path 2 10.99.1.1:4420 via eth2: nvme1 connecting DEGRADED" in detail


def test_the_boot_unit_waits_for_every_path_and_sets_the_iopolicy(tmp_path, capsys):
    inv = inventory()
    recipe, host = BootTimeoutsRecipe(inv.arrays), inv.hosts["i1"]
    facts = dict.fromkeys(recipe.facts(host))
    facts.update(enabled="enabled", multipath=NvmeMultipath().parse(MULTIPATH_ON))
    written = " ".join(c.masked() for c in recipe.plan(host, facts)[0].commands)
    assert '"iopolicy": "round-robin"' in written and '"paths": 2' in written
    sysfs, subsystems = tmp_path / "nvme", tmp_path / "nvme-subsystem"
    for name, state in (("nvme0", "live"), ("nvme1", "connecting")):
        (sysfs / name).mkdir(parents=True)
        (sysfs / name / "subsysnqn").write_text(NQN + "\n")
        (sysfs / name / "state").write_text(state + "\n")
        (sysfs / name / "ctrl_loss_tmo").write_text("off\n")
    (subsystems / "nvme-subsys0").mkdir(parents=True)
    (subsystems / "nvme-subsys0" / "subsysnqn").write_text(NQN + "\n")
    (subsystems / "nvme-subsys0" / "iopolicy").write_text("numa\n")
    config = tmp_path / "t.json"
    document = json.loads(nvme_persist.timeouts_json({NQN: {"timeouts": {"ctrl_loss_tmo": 60}, "paths": 2,
                                                            "iopolicy": "round-robin"}}))
    config.write_text(json.dumps({**document, "wait_s": 0}))
    main = runpy.run_path(_script(tmp_path))["main"]
    assert main(str(config), str(sysfs), str(subsystems)) == 1       # one path of two never came live
    assert (subsystems / "nvme-subsys0" / "iopolicy").read_text() == "round-robin\n"
    assert (sysfs / "nvme0" / "ctrl_loss_tmo").read_text() == "60\n"
    assert f"only 1 of 2 paths live for {NQN}" in capsys.readouterr().err


def _script(tmp_path) -> str:
    path = tmp_path / "nvme_timeouts.py"
    path.write_text(data.text("nvme_timeouts.py"))
    return str(path)


def test_a_lab_with_two_paths_has_two_links_per_pair_and_a_multipath_array():
    plan = plan_lab(LabSpec("mp", paths=2))
    initiator = plan.guest("initiator1")
    assert [(n.netdev, n.link.address("initiator1")) for n in initiator.private_nics] == [
        ("eth1", "10.99.0.2/24"), ("eth2", "10.99.1.2/24")]
    with pytest.raises(BadInput, match="--paths must be 1..4"):
        LabSpec("mp", paths=5).check()
    assert naming.path_marker(inventory().arrays[0], 1) == "fxctl:kv:path2"
