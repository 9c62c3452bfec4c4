"""The array exporter (fxctl/data/array_exporter.py, run on initiators with the host's python3): its
metrics from a fake sysfs and /proc/mounts, the degraded flag for each way an array breaks, its HTTP
endpoint as a process; and provision's exporter round (install, up to date, add an array, destroy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fxctl import data
from fxctl.data import array_exporter
from fxctl.inventory import load_inventory_text
from fxctl.ops import array_exporter as ops
from fxctl.provision.exporter import ExporterRecipe
from tests.support.sshd import free_port

NQN = "nqn.2026-11.io.example:kv"
ARRAY = {"name": "kv", "nqn": NQN, "md": "", "mount": "/mnt/kv", "members": 2, "paths": 1}


def fake_host(tmp_path, *, state="live", members=("in_sync", "in_sync"), array_state="clean", mounted=True):
    sys_root = tmp_path / "sys"
    ctrl = sys_root / "class" / "nvme" / "nvme0"
    ctrl.mkdir(parents=True)
    for name, value in (("subsysnqn", NQN), ("state", state), ("transport", "rdma"),
                        ("address", "traddr=10.99.0.1,trsvcid=4420"), ("ctrl_loss_tmo", "-1"),
                        ("reconnect_delay", "2"), ("fast_io_fail_tmo", "5")):
        (ctrl / name).write_text(value + "\n")
    other = sys_root / "class" / "nvme" / "nvme1"     # another subsystem's controller: not this array's
    other.mkdir()
    (other / "subsysnqn").write_text("nqn.other\n")
    (other / "state").write_text("connecting\n")
    md = sys_root / "block" / "md127" / "md"
    md.mkdir(parents=True)
    (md / "array_state").write_text(array_state + "\n")
    for n, flags in enumerate(members):
        dev = md / f"dev-nvme{n}n1"
        dev.mkdir()
        (dev / "state").write_text(flags + "\n")
        (dev / "block").mkdir()
    link = tmp_path / "dev" / "md127"
    link.parent.mkdir()
    link.write_text("")
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/md127 /mnt/kv xfs rw 0 0\n" if mounted else "proc /proc proc rw 0 0\n")
    return str(sys_root), str(mounts)


def samples(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def collect(tmp_path, monkeypatch, **kw):
    sys_root, mounts = fake_host(tmp_path, **kw)
    # the md device as the config names it: realpath must end in /dev/md127 for md_status to look in sysfs
    monkeypatch.setattr(array_exporter.os.path, "realpath", lambda p: "/dev/md127")
    return array_exporter.collect({"arrays": [ARRAY]}, sys_root, mounts)


def test_a_healthy_array_reads_clean(tmp_path, monkeypatch):
    text, degraded = collect(tmp_path, monkeypatch)
    got = samples(text)
    assert not degraded
    assert got[("fxctl_array_degraded", (("array", "kv"),))] == 0
    assert got[("fxctl_array_controllers", (("array", "kv"), ("state", "live")))] == 1
    assert got[("fxctl_array_md_members", (("array", "kv"),))] == 2
    assert got[("fxctl_array_md_up", (("array", "kv"),))] == 1
    assert got[("fxctl_array_mounted", (("array", "kv"), ("mount", "/mnt/kv")))] == 1
    assert got[("fxctl_array_ctrl_loss_tmo_seconds", (("array", "kv"), ("controller", "nvme0")))] == -1
    info = [k for k in got if k[0] == "fxctl_array_controller_info"]
    assert info == [("fxctl_array_controller_info", (("address", "traddr=10.99.0.1,trsvcid=4420"), ("array", "kv"),
                                                     ("controller", "nvme0"), ("state", "live"),
                                                     ("transport", "rdma")))]


@pytest.mark.parametrize("fault, kw, reads", [
    ("path reconnecting", {"state": "connecting"}, ("fxctl_array_controllers", "live", 0)),
    ("member faulty", {"members": ("in_sync", "faulty")}, ("fxctl_array_md_members", None, 1)),
    ("md broken", {"array_state": "broken"}, ("fxctl_array_md_up", None, 0)),
    ("not mounted", {"mounted": False}, ("fxctl_array_mounted", None, 0)),
])
def test_each_fault_reads_degraded(tmp_path, monkeypatch, fault, kw, reads):
    text, degraded = collect(tmp_path, monkeypatch, **kw)
    got = samples(text)
    assert degraded, fault
    assert got[("fxctl_array_degraded", (("array", "kv"),))] == 1
    name, state, value = reads
    matching = [v for (n, labels), v in got.items() if n == name and (state is None or ("state", state) in labels)]
    assert matching == [value], (fault, matching)


def test_an_array_without_md_or_controllers_reads_degraded(tmp_path):
    text, degraded = array_exporter.collect({"arrays": [dict(ARRAY, md="/dev/md/absent")]}, str(tmp_path),
                                            str(tmp_path / "none"))
    assert degraded and samples(text)[("fxctl_array_md_up", (("array", "kv"),))] == 0



def test_the_exporter_serves_http_and_writes_the_textfile(tmp_path):
    script = tmp_path / "array-exporter.py"
    script.write_text(data.text("array_exporter.py"))   # as provision installs it: the file alone
    port = free_port()
    textfile = tmp_path / "fxctl-array.prom"
    config = tmp_path / "array-exporter.json"
    config.write_text(ops.config_json([dict(ARRAY, md="/dev/md/absent")], f"127.0.0.1:{port}", str(textfile)))
    proc = subprocess.Popen([sys.executable, "-I", str(script), str(config)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                    body = answer.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "the exporter never answered"
                time.sleep(0.2)
        got = samples(body)
        assert got[("fxctl_array_degraded", (("array", "kv"),))] == 1    # no such md here: degraded, said so
        assert samples(textfile.read_text())[("fxctl_array_degraded", (("array", "kv"),))] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    once = subprocess.run([sys.executable, "-I", str(script), "--once", str(config)], capture_output=True, text=True)
    assert once.returncode == 1 and "fxctl_array_degraded" in once.stdout


INVENTORY = """
version: 1
hosts:
  t1: {address: 10.0.0.1, roles: [target]}
  i1: {address: 10.0.0.2, roles: [initiator]}
arrays:
  - {name: kv, target: t1, nqn: "nqn.2026-11.io.example:kv", listen: {address: 10.99.0.1},
     drives: [{serial: S1}, {serial: S2}], initiators: [i1], filesystem: {mount: /mnt/kv}}
  - {name: kv2, target: t1, nqn: "nqn.2026-11.io.example:kv2", listen: {address: 10.99.0.1},
     drives: [{serial: S3}], initiators: [i1], filesystem: {mount: /mnt/kv2}}
monitoring: {exporter_address: 0.0.0.0}
"""


def plan(chosen: list[str], facts: dict, removing: bool = False):
    inventory = load_inventory_text(INVENTORY)
    picked = tuple(a for a in inventory.arrays if a.name in chosen)
    recipe = ExporterRecipe(inventory.arrays, picked, inventory.monitoring, removing)
    host = inventory.hosts["i1"]
    assert set(recipe.facts(host)) == set(facts)
    return [c.masked() for step in recipe.plan(host, facts) for c in step.commands], recipe, host


def bare() -> dict:
    return {ops.CONFIG_PATH: None, ops.SCRIPT_PATH: None, ops.UNIT_PATH: None, "enabled": "not-found",
            "active": False}


def converged(names: list[str]) -> dict:
    inventory = load_inventory_text(INVENTORY)
    from fxctl.provision.exporter import watch_entry

    config = ops.config_json([watch_entry(a) for a in inventory.arrays if a.name in names], "0.0.0.0:9105", None)
    return {**{p: c for p, (c, _) in ops.persisted_files(config).items()}, "enabled": "enabled", "active": True}


def test_provision_installs_and_starts_the_exporter_for_the_arrays_it_provisions():
    commands, _, _ = plan(["kv"], bare())
    assert any(ops.CONFIG_PATH in c for c in commands) and any(ops.UNIT_PATH in c for c in commands)
    assert commands[-3:] == ["systemctl daemon-reload", f"systemctl enable {ops.UNIT_NAME}",
                             f"systemctl start {ops.UNIT_NAME}"]
    written = next(c for c in commands if ops.CONFIG_PATH in c)
    assert "kv2" not in written   # not provisioned by this run, not watched (it would read degraded)


def test_a_converged_exporter_changes_nothing_and_a_second_array_joins_the_first():
    assert plan(["kv"], converged(["kv"]))[0] == []
    commands, _, _ = plan(["kv2"], converged(["kv"]))
    written = next(c for c in commands if ops.CONFIG_PATH in c and "printf" in c)
    assert '"name": "kv"' in written and '"name": "kv2"' in written   # the watched one stays
    assert commands[-2:] == ["systemctl daemon-reload", f"systemctl restart {ops.UNIT_NAME}"]


def test_destroy_removes_its_array_and_with_none_left_the_unit():
    commands, _, _ = plan(["kv"], converged(["kv", "kv2"]), removing=True)
    assert f"systemctl restart {ops.UNIT_NAME}" in commands
    commands, _, _ = plan(["kv"], converged(["kv"]), removing=True)
    assert commands[0] == f"systemctl disable --now {ops.UNIT_NAME}"
    assert commands[1].startswith("rm -f ") and ops.UNIT_PATH in commands[1]
    assert plan(["kv"], bare(), removing=True)[0] == []


def test_the_installed_files_come_from_the_package():
    files = ops.persisted_files("{}")
    assert files[ops.SCRIPT_PATH][0] == data.text("array_exporter.py")
    assert "ExecStart=/usr/bin/python3 " + ops.SCRIPT_PATH in files[ops.UNIT_PATH][0]
    assert os.path.basename(ops.SCRIPT_PATH) == "array-exporter.py"
