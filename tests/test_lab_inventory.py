"""fxctl lab: per-guest identity (keys, seed), known_hosts, the ssh command, and the rendered inventory."""

from __future__ import annotations

import tarfile

import pytest
import yaml

from fxctl.inventory import load_inventory_text
from fxctl.lab.access import guest_host, ssh_argv, write_known_hosts
from fxctl.lab.image import LabImage
from fxctl.lab.inventory import render_inventory
from fxctl.lab.lab import _records, _write_seeds
from fxctl.lab.seed import CLIENT_KEY, HOST_KEY, ensure_keypair, public_key_line
from fxctl.lab.state import LabState, guest_dir
from fxctl.lab.topology import LabSpec, plan_lab


@pytest.fixture
def lab_state(tmp_path, monkeypatch):
    """A recorded (not running) lab with real keys, in a private XDG_STATE_HOME."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def make(**shape) -> LabState:
        spec = LabSpec(name="unit", **shape)
        image = LabImage("bookworm-test", tmp_path / "cache" / "bookworm-test")
        state = _records(plan_lab(spec), image)
        client = ensure_keypair(state.folder / CLIENT_KEY, "test")
        _write_seeds(state, public_key_line(client))
        write_known_hosts(state)
        state.save()
        return state
    return make


def test_each_guest_gets_its_own_host_key_uuid_and_hostnqn(lab_state):
    state = lab_state(targets=1, initiators=2)
    keys = {public_key_line(guest_dir("unit", g.name) / HOST_KEY) for g in state.guests}
    assert len(keys) == 3
    assert len({g.uuid for g in state.guests}) == 3
    assert len({g.hostnqn for g in state.guests}) == 3
    assert all(g.hostnqn.endswith(g.uuid) for g in state.guests)


def test_seed_carries_identity_and_addresses(lab_state):
    state = lab_state()
    guest = state.guest("initiator1")
    with tarfile.open(guest_dir("unit", "initiator1") / "seed.tar") as archive:
        members = {m.name: m for m in archive.getmembers()}
        env = archive.extractfile("etc/fxctl-lab/guest.env").read().decode()
        pub = archive.extractfile(f"etc/ssh/{HOST_KEY}.pub").read().decode()
        authorized = archive.extractfile("root/.ssh/authorized_keys").read().decode()
        hostnqn = archive.extractfile("etc/nvme/hostnqn").read().decode().strip()
    assert members[f"etc/ssh/{HOST_KEY}"].mode == 0o600
    assert "LAB_HOSTNAME=initiator1" in env
    assert f"LAB_LINKS='{guest.links[0].mac}=10.99.0.2/24'" in env
    assert pub.split()[:2] == public_key_line(guest_dir("unit", "initiator1") / HOST_KEY).split()
    assert authorized.strip() == public_key_line(state.folder / CLIENT_KEY)
    assert hostnqn == guest.hostnqn


def test_keys_survive_a_second_plan(lab_state):
    first = lab_state()
    key = public_key_line(guest_dir("unit", "target1") / HOST_KEY)
    uuid = first.guest("target1").uuid
    second = lab_state()
    assert public_key_line(guest_dir("unit", "target1") / HOST_KEY) == key
    assert second.guest("target1").uuid == uuid


def test_known_hosts_and_ssh_are_strict(lab_state):
    state = lab_state()
    lines = (state.folder / "known_hosts").read_text().splitlines()
    assert [line.split()[0] for line in lines] == [f"[127.0.0.1]:{g.ssh_port}" for g in state.guests]
    argv = ssh_argv(state, state.guests[0], ["hostname"], tty=False)
    assert "StrictHostKeyChecking=yes" in argv and f"UserKnownHostsFile={state.folder / 'known_hosts'}" in argv
    assert not any("StrictHostKeyChecking=no" in a or "accept-new" in a for a in argv)
    assert argv[-3:] == ["root@127.0.0.1", "--", "hostname"]


def test_guest_host_pins_the_guest_key(lab_state):
    state = lab_state()
    host = guest_host(state, state.guests[0])
    assert (host.address, host.port, host.user) == ("127.0.0.1", state.guests[0].ssh_port, "root")
    assert host.host_key == public_key_line(guest_dir("unit", "target1") / HOST_KEY)
    assert host.host_key.startswith("ssh-ed25519 AAAA")


def test_inventory_is_valid_and_pins_host_keys(lab_state):
    state = lab_state()
    text = yaml.safe_dump(render_inventory(state), sort_keys=False)
    inventory = load_inventory_text(text, "lab.yaml")
    data = yaml.safe_load(text)
    target = data["hosts"]["target1"]
    assert target["address"] == "127.0.0.1" and target["roles"] == ["target"]
    assert target["host_key"] == public_key_line(guest_dir("unit", "target1") / HOST_KEY)
    (array,) = data["arrays"]
    assert array["listen"]["address"] == "10.99.0.1" and array["initiators"] == ["initiator1"]
    assert [d["serial"] for d in array["drives"]] == [d.serial for d in state.guest("target1").drives]
    assert data["network"]["interfaces"]["initiator1"] == [{"netdev": "eth1", "address": "10.99.0.2/24",
                                                             "soft_roce": True}]
    assert data["lab"]["guests"]["initiator1"]["private"][0]["address"] == "10.99.0.2/24"
    assert inventory is not None


def test_bigger_lab_gets_one_array_per_link_over_a_share_of_drives(lab_state):
    state = lab_state(targets=1, initiators=2, drives=4)
    inventory = render_inventory(state)
    load_inventory_text(yaml.safe_dump(inventory, sort_keys=False), "lab.yaml")
    arrays = inventory["arrays"]
    assert [a["initiators"] for a in arrays] == [["initiator1"], ["initiator2"]]
    assert [a["listen"]["address"] for a in arrays] == ["10.99.0.1", "10.99.1.1"]
    serials = [d["serial"] for a in arrays for d in a["drives"]]
    assert len(serials) == len(set(serials)) == 4


def test_lab_inventory_leaves_defaults_to_the_model(lab_state):
    state = lab_state()
    data = render_inventory(state)
    (array,) = data["arrays"]
    assert "raid" not in array and "transport" not in array and "port" not in array["listen"]
    inventory = load_inventory_text(yaml.safe_dump(data, sort_keys=False), "lab.yaml")
    (spec,) = inventory.arrays
    assert (spec.transport, spec.listen.port, spec.chunk_bytes, inventory.network.mtu) == ("rdma", 4420, 65536, 9000)
    assert inventory.hosts["target1"].user == "root"


def test_a_lab_with_two_paths_writes_a_multipath_array_over_both_links(lab_state):
    state = lab_state(paths=2)
    data = render_inventory(state)
    (array,) = data["arrays"]
    assert "listen" not in array
    assert array["paths"] == [{"address": "10.99.0.1", "interface": "eth1"},
                              {"address": "10.99.1.1", "interface": "eth2"}]
    interfaces = data["network"]["interfaces"]
    assert [i["netdev"] for i in interfaces["initiator1"]] == ["eth1", "eth2"]
    assert all(i["soft_roce"] for i in interfaces["target1"])
    (spec,) = load_inventory_text(yaml.safe_dump(data, sort_keys=False), "lab.yaml").arrays
    assert spec.multipath and len(spec.drives) == 4
