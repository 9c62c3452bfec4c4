"""End to end in the QEMU lab: SSH with pinned host keys, NVMe drives, the private link, Soft-RoCE,
and `fxctl lab down` leaving nothing behind. One lab per session (see conftest.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time

import pytest
import yaml

from fxctl.errors import RemoteError
from fxctl.inventory import load_inventory_text
from fxctl.lab.access import guest_host, ssh_argv
from fxctl.lab.ports import port_is_free
from fxctl.lab.qemu import is_guest_process
from fxctl.lab.seed import ensure_keypair, public_key_line
from fxctl.remote.command import sh
from fxctl.remote.session import open_session
from tests.lab.conftest import fxctl

pytestmark = pytest.mark.lab


def test_every_guest_answers_ssh_through_the_inventory_with_pinned_host_keys(lab):
    result = fxctl("lab", "inventory", "--name", lab.name)
    assert result.returncode == 0, result.stderr
    inventory = load_inventory_text(result.stdout, "lab.yaml")
    data = yaml.safe_load(result.stdout)
    assert set(data["hosts"]) == {g.name for g in lab.guests()}
    for host in inventory.hosts.values():
        assert host.host_key and host.host_key.startswith("ssh-ed25519 AAAA")
        with open_session(host) as session:
            answer = session.run(sh("hostname"), check=True)
        assert answer.stdout.strip() == host.name


def test_guests_have_distinct_identities(lab):
    seen = {}
    for guest in lab.guests():
        out = lab.run(guest, sh("sh", "-c", "cat /etc/nvme/hostnqn /etc/nvme/hostid /etc/machine-id "
                                            "/sys/class/dmi/id/product_uuid")).stdout.split()
        seen[guest.name] = out
        assert out[0] == guest.hostnqn and out[1] == guest.uuid
        assert out[3].lower() == guest.uuid.lower(), "QEMU -uuid is the guest's SMBIOS UUID"
    for index in range(3):
        values = [v[index] for v in seen.values()]
        assert len(set(values)) == len(values), f"identity field {index} repeats across guests: {values}"


def test_target_shows_its_nvme_drives_by_serial(lab):
    for target in lab.guests("target"):
        listing = lab.run(target, sh("ls", "/dev/disk/by-id")).stdout.split()
        serials = lab.run(target, sh("sh", "-c", "cat /sys/class/nvme/nvme*/serial")).stdout.split()
        expected = [d.serial for d in target.drives]
        assert sorted(serials) == sorted(expected) and len(set(serials)) == len(serials)
        for drive in target.drives:
            assert drive.by_id.rsplit("/", 1)[1] in listing
        size = lab.run(target, sh("blockdev", "--getsize64", target.drives[0].by_id)).stdout.strip()
        assert int(size) == lab.state.drive_size


def test_private_link_has_mtu_9000_and_carries_jumbo_frames(lab):
    for guest in lab.guests():
        for link in guest.links:
            mtu = lab.run(guest, sh("cat", f"/sys/class/net/{link.netdev}/mtu")).stdout.strip()
            assert mtu == "9000"
            addr = json.loads(lab.run(guest, sh("ip", "-j", "addr", "show", "dev", link.netdev)).stdout)
            assert link.address in {f"{a['local']}/{a['prefixlen']}" for a in addr[0]["addr_info"]}
            peer = lab.state.guest(link.peer)
            peer_address = next(p.address for p in peer.links if p.index == link.index).split("/")[0]
            # 8972 + 28 bytes of headers = 9000, don't fragment: proves jumbo frames end to end
            ping = lab.run(guest, sh("ping", "-c", "2", "-W", "5", "-M", "do", "-s", "8972", peer_address))
            assert ping.ok, ping.stdout + ping.stderr


def test_soft_roce_on_the_initiator_is_active_with_a_roce_v2_gid(lab):
    initiator = lab.guests("initiator")[0]
    link = initiator.links[0]
    existed = lab.run(initiator, sh("rdma", "link", "show", "rxe0/1")).ok  # a reused lab may have it
    if not existed:
        added = lab.run(initiator, sh("rdma", "link", "add", "rxe0", "type", "rxe", "netdev", link.netdev))
        assert added.ok, added.stderr
    try:
        links = json.loads(lab.run(initiator, sh("rdma", "-j", "link", "show", "rxe0/1")).stdout)
        assert links[0]["state"] == "ACTIVE" and links[0]["netdev"] == link.netdev
        info = lab.run(initiator, sh("ibv_devinfo", "-d", "rxe0", "-v")).stdout
        assert "PORT_ACTIVE" in info and "active_mtu:\t\t4096" in info
        ipv4 = link.address.split("/")[0]
        assert f"::ffff:{ipv4}, RoCE v2" in info
        gid_type = lab.run(initiator, sh("cat", "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1")).stdout
        assert gid_type.strip() == "RoCE v2"
    finally:
        if not existed:
            lab.run(initiator, sh("rdma", "link", "delete", "rxe0"))


def test_guests_reach_nothing_beyond_the_lab(lab):
    """restrict=on user networking: no route out, the host's slirp side refuses, no resolver configured."""
    for guest in lab.guests():
        probe = lab.run(guest, sh("python3", "-c", PROBE_OUTSIDE), timeout=60)
        assert probe.ok, probe.stderr
        assert probe.stdout.split() == ["refused", "unreachable", "nodns"], probe.stdout


PROBE_OUTSIDE = """
import socket
s = socket.socket(); s.settimeout(5)
try:
    s.connect(("10.0.2.2", 22)); print("connected")
except OSError:
    print("refused")
s = socket.socket(); s.settimeout(5)
try:
    s.connect(("192.0.2.1", 80)); print("connected")
except OSError as e:
    print("unreachable" if e.errno == 101 else f"other:{e.errno}")
print("nodns" if "nameserver" not in open("/etc/resolv.conf").read() else "dns")
"""


def test_a_changed_host_key_is_refused(lab, tmp_path):
    guest = lab.guests()[0]
    impostor = public_key_line(ensure_keypair(tmp_path / "impostor", "impostor"))
    with pytest.raises(RemoteError) as pinned:
        open_session(guest_host(lab.state, guest, pinned=impostor))
    assert "host key" in pinned.value.message
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{guest.ssh_port} {impostor}\n")
    host = guest_host(lab.state, guest)
    with pytest.raises(RemoteError) as changed:
        open_session(dataclasses.replace(host, host_key=None, known_hosts=str(known_hosts)))
    assert "CHANGED" in changed.value.message
    argv = ssh_argv(lab.state, guest, ["true"], tty=False)
    argv = [f"UserKnownHostsFile={known_hosts}" if a.startswith("UserKnownHostsFile=") else a for a in argv]
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in refused.stderr


def test_lab_ssh_runs_a_command(lab):
    guest = lab.guests("initiator")[0]
    result = fxctl("lab", "ssh", "--name", lab.name, guest.name, "cat", "/etc/hostname")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == guest.name
    assert fxctl("lab", "ssh", "--name", lab.name, guest.name, "false").returncode == 1


def test_up_on_a_running_lab_is_harmless(lab):
    pids = {g.name: g.pid for g in lab.guests()}
    result = fxctl("lab", "up", "--name", lab.name, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "already running" in result.stderr
    assert {g.name: g.pid for g in lab.guests()} == pids
    status = json.loads(fxctl("-o", "json", "lab", "status", "--name", lab.name).stdout)
    assert all(g["running"] for g in status["guests"])


@pytest.mark.lab_stops
def test_down_leaves_no_qemu_process_and_frees_its_ports(lab):
    """Runs after every other lab test (conftest orders lab_stops tests last in the package): it stops the lab."""
    if not lab.started_here:
        pytest.skip(f"FXCTL_LAB_NAME={lab.name} names a lab this session did not start: not stopping it")
    state = lab.state
    pids = [g.pid for g in state.guests]
    result = fxctl("lab", "down", "--name", lab.name)
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids), "a QEMU of this lab is still running"
    assert not any(is_guest_process(g.pid, state.name, g.name) for g in state.guests)
    assert not _qemu_named(lab.name)
    assert all(port_is_free(port) for port in state.ports())
    status = json.loads(fxctl("-o", "json", "lab", "status", "--name", lab.name).stdout)
    assert not any(g["running"] for g in status["guests"])


def _alive(pid: int) -> bool:
    """A live process (zombies waiting for their parent to reap them count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _qemu_named(lab_name: str) -> list[int]:
    found = []
    marker = f"fxctl-lab-{lab_name}-".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    cmdline = handle.read()
            except OSError:
                continue
            if marker in cmdline and _alive(int(entry)):
                found.append(int(entry))
    return found
