"""`fxctl net` pieces without a host: desired state, unsupported/strict, verify checks, perftest JSON."""

from __future__ import annotations

import json

import pytest

from fxctl.engine.apply import HostReport, Status, StepReport
from fxctl.errors import BadInput, ExitCode
from fxctl.inventory import load_inventory_text
from fxctl.inventory.model import InterfaceSpec
from fxctl.net.apply import NetResult, NetStatus, mark_unsupported
from fxctl.net.bench import parse_perftest_json
from fxctl.net.desired import check_network, effective_dscp_map, qos_driver, resolve_interfaces
from fxctl.net.verify import check_interface, expected_active_mtu, gid_matches
from tests.golden import GOLDEN
from tests.support.cli import run_main

OUTPUTS = GOLDEN / "facts" / "outputs"

INVENTORY = """
version: 1
hosts:
  a: {address: 127.0.0.1}
  b: {address: 127.0.0.2}
network:
  interfaces:
    a: [{netdev: eth1, address: 10.99.0.1/24, soft_roce: true}]
    b: [{rdma_device: mlx5_0, address: 10.99.0.2/24}]
"""


def test_defaults_follow_the_issue():
    network = check_network(load_inventory_text(INVENTORY))
    assert (network.pfc_priority, network.mtu, network.roce_tos, network.trust) == (3, 9000, 106, "dscp")
    assert effective_dscp_map(network) == [(26, 3), (48, 6)]
    assert network.roce_tos >> 2 == 26


def test_cnp_dscp_joins_the_map():
    text = INVENTORY.replace("network:\n", "network:\n  cnp: {dscp: 46, priority: 7}\n")
    assert effective_dscp_map(check_network(load_inventory_text(text))) == [(26, 3), (46, 7), (48, 6)]


@pytest.mark.parametrize("patch, message", [
    ("  ets: [50, 50]\n", "8 shares"),
    ("  pfc_priority: 5\n", "pfc_priority 5"),
])
def test_bad_network_sections_are_refused(patch, message):
    with pytest.raises(BadInput, match=message):
        check_network(load_inventory_text(INVENTORY.replace("network:\n", "network:\n" + patch)))


def test_driver_from_kernel_module():
    assert [qos_driver("auto", d) for d in ("mlx5_core", "bnxt_en", "virtio_net", None)] == \
        ["mlx5", "bnxt", "dcb", "dcb"]
    assert qos_driver("dcb", "mlx5_core") == "dcb"


def test_interfaces_resolve_from_rdma_links():
    links = [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "netdev": "ens1f0np0"}]
    specs = [InterfaceSpec("b", rdma_device="mlx5_0"), InterfaceSpec("b", netdev="eth1", soft_roce=True)]
    resolved = resolve_interfaces(specs, links)
    assert resolved[0].netdev == "ens1f0np0"
    assert resolved[1].rdma_device == "rxe0"
    existing = resolve_interfaces([InterfaceSpec("a", netdev="eth1", soft_roce=True)],
                                  [{"device": "rxe7", "port": 1, "state": "ACTIVE", "netdev": "eth1"}])
    assert existing[0].rdma_device == "rxe7"  # one bound already: that one, no second rxe
    named = resolve_interfaces([InterfaceSpec("a", netdev="eth1", rdma_device="rxe0", soft_roce=True)],
                               [{"device": "rxe7", "port": 1, "state": "ACTIVE", "netdev": "eth1"}])
    assert named[0].rdma_device == "rxe7"


def test_two_soft_roce_ports_of_a_bare_host_get_two_devices():
    # both ports of a multipath host planned in one pass, no rxe on either yet: each gets a name of its own
    # (both were named rxe0, and the second `rdma link add rxe0` failed on a fresh lab)
    specs = [InterfaceSpec("a", netdev="eth1", soft_roce=True), InterfaceSpec("a", netdev="eth2", soft_roce=True)]
    assert [s.rdma_device for s in resolve_interfaces(specs, [])] == ["rxe0", "rxe1"]
    one = [{"device": "rxe0", "port": 1, "state": "ACTIVE", "netdev": "eth2"}]
    assert [s.rdma_device for s in resolve_interfaces(specs, one)] == ["rxe1", "rxe0"]


def report(*steps) -> HostReport:
    return HostReport("a", Status.OK, [StepReport(name, Status.OK, reason) for name, reason in steps])


def test_unsupported_is_its_own_status_and_strict_fails():
    steps = (("eth1: mtu", "eth1 mtu 9000"), ("eth1: pfc", "unsupported: PFC on eth1: Operation not supported"))
    lenient = NetResult(False, False, [mark_unsupported(report(*steps), strict=False)])
    assert [s.status for s in lenient.reports[0].steps] == [Status.OK, NetStatus.UNSUPPORTED]
    assert lenient.exit_code() == ExitCode.OK
    assert lenient.unsupported() == [("a", "eth1: pfc", "unsupported: PFC on eth1: Operation not supported")]
    strict = NetResult(False, True, [mark_unsupported(report(*steps), strict=True)])
    assert strict.exit_code() == ExitCode.HOST_FAILED
    assert "eth1: pfc" in strict.reports[0].error


def test_active_mtu_of_netdev_mtu():
    assert [expected_active_mtu(m) for m in (9000, 4200, 1500)] == [4096, 4096, 1024]


def test_roce_v2_gid_of_an_ipv4_address():
    assert gid_matches("0000:0000:0000:0000:0000:ffff:0a63:0001", "10.99.0.1/24")
    assert not gid_matches("fe80:0000:0000:0000:5054:00ff:fedd:0101", "10.99.0.1/24")


def test_verify_row_from_the_lab_probe():
    probe = json.loads((OUTPUTS / "net_lab_probe_target1.json").read_text())
    spec = InterfaceSpec("target1", netdev="eth1", address="10.99.0.1/24", soft_roce=True)
    row = check_interface("target1", spec, probe["ports"], 9000)
    assert (row["ok"], row["port"], row["gid_index"], row["active_mtu"]) == (True, "rxe0/1", 1, 4096)
    wrong = check_interface("target1", spec, probe["ports"], 1500)
    assert not wrong["ok"] and "active_mtu 4096, want 1024" in wrong["detail"]
    renamed = InterfaceSpec("target1", netdev="eth1", rdma_device="rxe5", address="10.99.0.1/24", soft_roce=True)
    assert check_interface("target1", renamed, probe["ports"], 9000)["ok"]
    other = InterfaceSpec("target1", netdev="eth1", rdma_device="mlx5_0", address="10.99.0.1/24")
    assert "the inventory names mlx5_0" in check_interface("target1", other, probe["ports"], 9000)["detail"]
    missing = check_interface("target1", InterfaceSpec("target1", netdev="eth2"), probe["ports"], 9000)
    assert not missing["ok"] and "no RDMA port on eth2" in missing["detail"]


def test_perftest_json_with_its_unquoted_sl_key():
    text = (OUTPUTS / "net_perftest_write_bw_qos.json").read_text()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    data = parse_perftest_json(text)
    assert data["results"]["sl"] == 3
    assert (data["results"]["BW_average"], data["results"]["MsgSize"]) == (97.47, 1048576)
    assert data["test_info"]["GID_index"] == 3


def test_probe_runs_with_plain_python_where_there_is_no_rdma(tmp_path):
    """The probe is standard-library Python: on a host without pyverbs or RDMA it reports no ports."""
    import subprocess
    import sys

    from fxctl import data

    script = tmp_path / "probe.py"
    script.write_text(data.text("net_probe.py"))
    done = subprocess.run([sys.executable, "-S", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["probe"] in ("pyverbs", "sysfs") and isinstance(result["ports"], list)


def test_boot_script_and_unit_are_installed_as_written():
    from fxctl import data
    from fxctl.net.persist import CONFIG_PATH, SCRIPT_PATH

    compile(data.text("net_apply.py"), "net_apply.py", "exec")
    unit = data.text("fxctl-net.service")
    assert f"ExecStart=/usr/bin/python3 {SCRIPT_PATH} {CONFIG_PATH}" in unit
    assert "Before=network-online.target fxctl-nvmet.service" in unit


@pytest.mark.parametrize("subcommand", [["apply"], ["verify"], ["bench", "a", "b"]])
def test_cli_without_a_network_section_is_bad_input(subcommand, tmp_path, monkeypatch, capsys):
    path = tmp_path / "inv.yaml"
    path.write_text("version: 1\nhosts:\n  a: {address: 127.0.0.1}\n  b: {address: 127.0.0.2}\n")
    code, _, err = run_main(["-i", str(path), "net", *subcommand], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT
    assert "has no network: section" in err


def test_cli_bench_refuses_a_host_outside_the_network(tmp_path, monkeypatch, capsys):
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY + "  # end\n")
    code, _, err = run_main(["-i", str(path), "net", "bench", "a", "a"], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT and "two different hosts" in err


def test_check_table_says_how_many_commands_a_pending_step_would_run():
    from fxctl.cli.net_cmd import apply_rows

    pending = HostReport("a", Status.PENDING,
                         [StepReport("eth1: mtu", Status.PENDING, "", ["ip link set dev eth1 mtu 9000"]),
                          StepReport("eth1: up", Status.OK, "eth1 is up")])
    failed = HostReport("b", Status.FAILED, error="cannot connect")
    rows = apply_rows([pending, failed], verbose=0)
    assert rows[0] == ["a", "eth1: mtu", "pending", "1 command(s) (-v shows them)"]
    assert rows[1] == ["a", "eth1: up", "ok", "eth1 is up"]
    assert rows[2] == ["b", "-", "failed", "cannot connect"]


def test_perftest_45_output_with_bare_keys_values_and_trailing_commas(repo_root):
    """The real --out_json of Debian 12's perftest 4.5 (ib_write_bw between two lab guests)."""
    text = (repo_root / "tests/golden/facts/outputs/perftest_4.5_ib_write_bw_client.json").read_text()
    data = parse_perftest_json(text)
    assert data["results"] == {"MsgSize": 1048576, "n_iterations": 15, "BW_peak": 0.0, "BW_average": 0.040606,
                               "MsgRate": 0.000005}
    assert data["test_info"]["test"] == "RDMA_Write_BW_Test" and data["test_info"]["TX_depth"] == 128


def test_traffic_runs_over_each_interface_of_the_hosts(monkeypatch):
    # a multipath host has two RoCE ports: the ping-pong runs over the first of each host, then the second
    from fxctl.net import verify

    seen = []
    monkeypatch.setattr(verify, "pingpong", lambda inventory, rows, journal: seen.append(
        {h: r["port"] for h, r in rows.items()}) or "")
    rows = {"a": [{"port": "rxe0/1"}, {"port": "rxe1/1"}], "b": [{"port": "rxe0/1"}, {"port": "rxe1/1"}]}
    note = verify.traffic_over_each_link(None, rows, None)
    assert seen == [{"a": "rxe0/1", "b": "rxe0/1"}, {"a": "rxe1/1", "b": "rxe1/1"}]
    assert note.count("ibv_rc_pingpong") == 2 and note.endswith("(interface 2)")
    monkeypatch.setattr(verify, "pingpong", lambda *args: "traffic failed on b: boom")
    assert "traffic failed on b: boom" in verify.traffic_over_each_link(None, rows, None)
