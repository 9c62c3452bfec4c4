"""`fxctl net` end to end in the QEMU lab, through the real CLI.

The guests' private link is virtio-net (no DCB) with Soft-RoCE: apply creates rxe where no RDMA device is
bound yet (an rxe0 made earlier, e.g. by the provision tests, counts as converged), sets MTU 9000 and the
RDMA-CM defaults; PFC, DSCP map, trust, ECN and global pause are reported "unsupported" item by item, and
--strict fails on them. Verify finds each guest's port ACTIVE with active_mtu 4096 and the RoCE v2 GID of
its address, and reads counters around RC traffic between the guests.
"""

from __future__ import annotations

import json

import pytest
import yaml

from fxctl.net.verify import gid_matches
from fxctl.remote.command import script, sh
from tests.lab.conftest import fxctl

pytestmark = pytest.mark.lab
TIMEOUT = 600
TEST_DEVICE = "rxefx0"   # a Soft-RoCE device this file creates on the management netdev, then deletes


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    result = fxctl("lab", "inventory", "--name", lab.name)
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("net") / "lab.yaml"
    path.write_text(result.stdout)
    return path


def net(inventory, *args, timeout: float = TIMEOUT):
    result = fxctl("-i", str(inventory), "-o", "json", "net", *args, timeout=timeout)
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result.returncode, data, result


def steps_of(data, host: str) -> dict:
    report = next(h for h in data["hosts"] if h["host"] == host)
    return {s["step"]: s for s in report["steps"]}


def changed(data) -> list[str]:
    return [f"{h['host']}: {s['step']}" for h in data["hosts"] for s in h["steps"]
            if s["status"] in ("changed", "pending")]


def on(lab, guest, text: str, *args) -> str:
    result = lab.run(guest, script(text, *args))
    assert result.ok, result.stderr
    return result.stdout.strip()


def test_soft_roce_is_created_where_no_rdma_device_is_bound(lab, inventory, tmp_path):
    """A fresh netdev (the management one, at its own MTU) gets an rxe device from `net apply`."""
    guest = lab.guests("initiator")[0]
    lab.run(guest, sh("rdma", "link", "delete", TEST_DEVICE))
    mgmt = on(lab, guest,
              'for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$1" ] && echo "${d##*/}"; done; true',
              guest.mgmt_mac)
    assert mgmt and mgmt != "eth1", mgmt
    mtu = int(on(lab, guest, 'cat "/sys/class/net/$1/mtu"', mgmt))
    data = yaml.safe_load(inventory.read_text())
    data["network"]["mtu"] = mtu
    data["network"]["interfaces"] = {guest.name: [{"netdev": mgmt, "rdma_device": TEST_DEVICE, "soft_roce": True}]}
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        code, result, raw = net(fresh, "apply", "--host", guest.name)
        assert code == 0, raw.stdout + raw.stderr
        step = steps_of(result, guest.name)[f"{mgmt}: rdma device"]
        assert step["status"] == "changed"
        assert step["commands"] == [f"rdma link add {TEST_DEVICE} type rxe netdev {mgmt}"]
        links = json.loads(on(lab, guest, "rdma -j link show"))
        assert any(link["ifname"] == TEST_DEVICE and link["netdev"] == mgmt for link in links)
    finally:
        lab.run(guest, sh("rdma", "link", "delete", TEST_DEVICE))


def test_apply_converges_the_lab(lab, inventory):
    code, data, raw = net(inventory, "apply")
    assert code == 0, raw.stdout + raw.stderr
    for guest in lab.guests():
        steps = steps_of(data, guest.name)
        assert steps["eth1: rdma device"]["status"] in ("ok", "changed")
        assert steps["eth1: mtu"]["status"] in ("ok", "changed")
        links = json.loads(on(lab, guest, "rdma -j link show"))
        bound = [link["ifname"] for link in links if link["netdev"] == "eth1"]
        assert len(bound) == 1, links        # one rxe on eth1: never a second one
        assert on(lab, guest, "cat /sys/class/net/eth1/mtu") == "9000"
        folder = f"/sys/kernel/config/rdma_cm/{bound[0]}/ports/1"
        assert on(lab, guest, 'cat "$1/default_roce_mode" "$1/default_roce_tos"', folder).splitlines() == \
            ["RoCE v2", "106"]
        assert on(lab, guest, "systemctl is-enabled fxctl-net.service") == "enabled"


def test_virtio_qos_is_reported_unsupported_item_by_item(lab, inventory):
    code, data, raw = net(inventory, "apply")
    assert code == 0, raw.stdout + raw.stderr
    for guest in lab.guests():
        steps = steps_of(data, guest.name)
        for item in ("eth1: pfc", "eth1: dscp map", "eth1: trust", "eth1: ecn"):
            assert steps[item]["status"] == "unsupported", steps[item]
        assert "Operation not supported" in steps["eth1: pfc"]["reason"]
        unsupported = {(u["host"], u["step"]) for u in data["unsupported"]}
        assert (guest.name, "eth1: pfc") in unsupported
    table = fxctl("-i", str(inventory), "net", "apply", timeout=TIMEOUT)
    assert table.returncode == 0
    assert "unsupported" in table.stdout and "PFC on eth1: Attribute read: Operation not supported" in table.stdout


def test_second_apply_changes_nothing_and_check_plans_nothing(inventory):
    code, data, raw = net(inventory, "apply")
    assert code == 0, raw.stdout + raw.stderr
    assert changed(data) == []
    code, data, raw = net(inventory, "apply", "--check")
    assert code == 0, raw.stdout + raw.stderr
    assert changed(data) == []


def test_strict_fails_on_what_virtio_lacks(inventory):
    code, data, raw = net(inventory, "apply", "--strict")
    assert code == 1, raw.stdout + raw.stderr
    for report in data["hosts"]:
        assert report["status"] == "failed"
        assert report["error"].startswith("--strict: ") and "eth1: pfc" in report["error"]


def test_verify_finds_active_ports_and_the_roce_v2_gid(lab, inventory):
    code, data, raw = net(inventory, "verify", timeout=300)
    assert code == 0, raw.stdout + raw.stderr
    assert data["probe"] == "pyverbs"
    for guest in lab.guests():   # every private link (the lab has two: both RoCE ports of a multipath host)
        for link in guest.links:
            port = next(p for p in data["ports"] if p["host"] == guest.name and p["netdev"] == link.netdev)
            assert (port["state"], port["active_mtu"], port["link_layer"]) == ("ACTIVE", 4096, "Ethernet"), port
            assert gid_matches(port["gid"], link.address.split("/")[0]), port
            on_host = on(lab, guest, 'cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$2"',
                         port["device"], port["gid_index"])
            assert on_host == "RoCE v2"
    links = len(lab.guests()[0].links)
    assert data["traffic"].startswith("ibv_rc_pingpong") and data["traffic"].count("ibv_rc_pingpong") == links, \
        data["traffic"]
    moved = {(c["host"], c["port"], c["counter"]) for c in data["counters"] if c["delta"] > 0}
    for port in data["ports"]:   # traffic went over each port
        assert {(port["host"], port["port"], "sent_pkts"), (port["host"], port["port"], "rcvd_pkts")} <= moved, port
    table = fxctl("-i", str(inventory), "net", "verify", timeout=300)
    assert table.returncode == 0 and "ACTIVE" in table.stdout and "4096" in table.stdout


def test_boot_script_reapplies_the_state(lab, inventory):
    guest = lab.guests()[0]
    result = lab.run(guest, sh("python3", "/usr/local/lib/fxctl/net-apply.py", "/etc/fxctl/net.json"), timeout=120)
    assert result.ok, result.stderr
    assert "fxctl-net: applied /etc/fxctl/net.json" in result.stdout
    assert "(skipped)" in result.stderr    # PFC & co. on virtio: logged, not fatal
    unit = lab.run(guest, script("systemctl restart fxctl-net.service && systemctl is-active fxctl-net.service"),
                   timeout=120)
    assert unit.ok and unit.stdout.strip() == "active", unit.stdout + unit.stderr
    code, data, raw = net(inventory, "apply", "--check")
    assert code == 0 and changed(data) == [], raw.stdout


def test_bench_names_the_missing_perftest_package(lab, inventory):
    present = lab.run(lab.guests()[0], script("command -v ib_write_bw"))
    if present.ok:
        code, data, raw = net(inventory, "bench", lab.guests("target")[0].name, lab.guests("initiator")[0].name,
                              "--seconds", "2", "--size", "65536", "--qps", "1", timeout=300)
        assert code == 0, raw.stdout + raw.stderr
        assert data["bw_avg_gbps"] > 0
        return
    result = fxctl("-i", str(inventory), "net", "bench", lab.guests("target")[0].name,
                   lab.guests("initiator")[0].name, timeout=300)
    assert result.returncode == 1
    assert "ib_write_bw is not installed" in result.stderr and "perftest" in result.stderr


def test_probe_without_pyverbs_reads_sysfs_and_ibv_devinfo(lab):
    """The fallback path of the probe on a real rxe port: pyverbs made unimportable."""
    from fxctl import data

    guest = lab.guests()[0]
    code = "import sys\nsys.modules['pyverbs'] = None\n" + data.text("net_probe.py")
    result = lab.run(guest, sh("python3", "-c", code), timeout=120)
    assert result.ok, result.stderr
    probe = json.loads(result.stdout)
    assert probe["probe"] == "sysfs"
    port = next(p for p in probe["ports"] if p["netdev"] == "eth1")
    assert (port["state"], port["active_mtu"], port["link_layer"]) == ("ACTIVE", 4096, "Ethernet")
    address = guest.links[0].address
    assert any(g["type"] == "RoCE v2" and gid_matches(g["gid"], address) for g in port["gids"])
