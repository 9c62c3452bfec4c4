"""fxctl lab: the lab's shape, sizes, loopback ports, and the QEMU command line (no QEMU needed)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from fxctl.errors import BadInput
from fxctl.lab.ports import allocate_ports, port_is_free
from fxctl.lab.qemu import is_guest_process, process_name, qemu_argv, stop_guest
from fxctl.lab.state import DriveRecord, GuestRecord, LinkRecord
from fxctl.lab.topology import LabSpec, parse_size, plan_lab


def test_default_lab_is_one_target_one_initiator_on_one_link():
    plan = plan_lab(LabSpec(name="lab"))
    target, initiator = plan.guests
    assert (target.name, target.role) == ("target1", "target")
    assert (initiator.name, initiator.role) == ("initiator1", "initiator")
    assert len(plan.links) == 1
    (tnic,), (inic,) = target.private_nics, initiator.private_nics
    assert (tnic.netdev, tnic.link.address("target1")) == ("eth1", "10.99.0.1/24")
    assert (inic.netdev, inic.link.address("initiator1")) == ("eth1", "10.99.0.2/24")
    assert [n.netdev for n in target.nics] == ["eth0", "eth1"]
    assert len(target.drives) == 4 and initiator.drives == ()


def test_every_initiator_gets_a_link_to_every_target():
    plan = plan_lab(LabSpec(name="big", targets=2, initiators=3, drives=2))
    assert len(plan.links) == 6
    assert len({link.subnet for link in plan.links}) == 6
    initiator = plan.guest("initiator2")
    assert sorted(n.link.peer("initiator2") for n in initiator.private_nics) == ["target1", "target2"]
    assert [n.netdev for n in plan.guest("target1").nics] == ["eth0", "eth1", "eth2", "eth3"]


def test_macs_and_serials_are_distinct_within_and_across_labs():
    one, two = plan_lab(LabSpec(name="one", targets=2)), plan_lab(LabSpec(name="two", targets=2))
    macs = [n.mac for p in (one, two) for g in p.guests for n in g.nics]
    serials = [d.serial for p in (one, two) for g in p.guests for d in g.drives]
    assert len(set(macs)) == len(macs)
    assert len(set(serials)) == len(serials)
    assert all(len(s) <= 20 for s in serials), "NVMe serials are at most 20 characters"


@pytest.mark.parametrize("text,value", [("256M", 256 << 20), ("1G", 1 << 30), ("512MiB", 512 << 20), ("4096", 4096)])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("spec", [LabSpec(name="x", drives=0), LabSpec(name="x", drive_size=1 << 20),
                                  LabSpec(name="x", targets=5, initiators=5)])
def test_bad_shapes_are_refused(spec):
    with pytest.raises(BadInput):
        plan_lab(spec)


def test_bad_size_is_refused():
    with pytest.raises(BadInput):
        parse_size("lots")


def test_ports_are_free_distinct_and_avoid_other_labs():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken_port = busy.getsockname()[1]
        assert not port_is_free(taken_port)
        ports = allocate_ports(5, taken={taken_port})
    assert len(set(ports)) == 5 and taken_port not in ports
    assert all(port_is_free(p) for p in ports)


def _guest(**extra) -> GuestRecord:
    base = dict(name="target1", role="target", number=1, uuid="2c7e3f5a-1b7c-4a59-9c55-0c1f0e2d3a4b",
                hostnqn="nqn.2014-08.org.nvmexpress:uuid:2c7e3f5a-1b7c-4a59-9c55-0c1f0e2d3a4b",
                ssh_port=40022, mgmt_mac="52:54:00:ab:01:00")
    base.update(extra)
    return GuestRecord(**base)


def test_qemu_argv_loopback_only_restricted_and_pvh(tmp_path):
    guest = _guest(links=[LinkRecord(0, "initiator1", "eth1", "52:54:00:ab:01:01", "10.99.0.1/24", 40100, True)],
                   drives=[DriveRecord("FXLABABG1D1", str(tmp_path / "nvme1.img"), "/dev/disk/by-id/x")])
    argv = qemu_argv("lab", guest, vmlinux="/c/vmlinux", initramfs="/c/initramfs.cpio.lz4", memory_mib=1280,
                     folder=tmp_path)
    line = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64"
    assert "-accel tcg,tb-size=256 -cpu max -smp 1 -m 1280" in line
    assert f"-uuid {guest.uuid}" in line
    assert "-kernel /c/vmlinux -initrd /c/initramfs.cpio.lz4" in line
    assert "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:40022-:22" in line
    assert "stream,id=link0,server=on,addr.type=inet,addr.host=127.0.0.1,addr.port=40100" in line
    assert "host_mtu=9000" in line
    assert f"file={tmp_path / 'nvme1.img'},if=none,id=nvm1,format=raw,cache=unsafe" in line
    assert "pcie-root-port,id=rp1,chassis=1,addr=0xc" in line  # a drive can be hot-unplugged (lab fault unplug)
    assert "nvme,id=nvme1,serial=FXLABABG1D1,drive=nvm1,bus=rp1" in line
    assert f"-qmp unix:{tmp_path / 'qmp.sock'},server=on,wait=off" in line
    assert f"name=opt/io.fxctl.lab/seed,file={tmp_path / 'seed.tar'}" in line
    assert argv[-3:] == ["-daemonize", "-pidfile", str(tmp_path / "qemu.pid")]
    assert process_name("lab", "target1") in argv
    for netdev in [a for i, a in enumerate(argv) if argv[i - 1] == "-netdev"]:
        assert "127.0.0.1" in netdev, f"every netdev stays on loopback: {netdev}"


@pytest.fixture
def fake_qemu():
    """A process that looks like this lab's QEMU in /proc (argv0 and -name), but is a sleeping python."""
    marker = process_name("unit", "target1")
    proc = subprocess.Popen(["bash", "-c", f'exec -a qemu-system-x86_64 {sys.executable} -c '
                             f'"import time; time.sleep(60)" -name {marker}'])
    for _ in range(50):
        if is_guest_process(proc.pid, "unit", "target1"):
            break
        time.sleep(0.05)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_stop_kills_only_the_process_that_is_this_guest(fake_qemu):
    assert is_guest_process(fake_qemu.pid, "unit", "target1")
    assert not is_guest_process(fake_qemu.pid, "other", "target1")
    assert not is_guest_process(os.getpid(), "unit", "target1")
    assert not stop_guest(fake_qemu.pid, "unit", "initiator1"), "a pid of another guest is never killed"
    assert fake_qemu.poll() is None
    assert stop_guest(fake_qemu.pid, "unit", "target1")
    assert fake_qemu.wait(timeout=5) is not None
    assert not is_guest_process(fake_qemu.pid, "unit", "target1")
