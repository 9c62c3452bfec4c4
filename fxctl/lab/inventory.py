"""The running lab as an fxctl inventory (the schema of examples/inventory.yaml), host keys pinned."""

from __future__ import annotations

from fxctl.lab.access import client_key, guest_host_key, known_hosts_file
from fxctl.lab.ports import LOOPBACK
from fxctl.lab.state import GuestRecord, LabState

NQN_PREFIX = "nqn.2026-11.io.fxctl.lab"
LISTEN_PORT = 4420


def render_inventory(state: LabState) -> dict:
    """hosts (127.0.0.1 + forwarded port, pinned host key), arrays, network (rxe on the private
    links, MTU 9000) and `lab:` facts (each guest's private-link addresses, ports, drives)."""
    return {
        "version": 1,
        "defaults": {"user": "root", "key": str(client_key(state)), "known_hosts": str(known_hosts_file(state)),
                     "sudo": False, "connect_timeout": 10},
        "hosts": {g.name: _host(state, g) for g in state.guests},
        "arrays": lab_arrays(state),
        "network": {"driver": "auto", "mtu": 9000, "global_pause": False,
                    "interfaces": {g.name: [{"netdev": link.netdev, "address": link.address, "soft_roce": True}
                                            for link in g.links] for g in state.guests if g.links}},
        "lab": {"name": state.name, "image": state.image_key, "guests": {g.name: _facts(g) for g in state.guests}},
    }


def _host(state: LabState, guest: GuestRecord) -> dict:
    return {"address": LOOPBACK, "port": guest.ssh_port, "host_key": guest_host_key(state, guest),
            "roles": [guest.role], "hostnqn": guest.hostnqn, "hostid": guest.uuid}


def _facts(guest: GuestRecord) -> dict:
    return {"role": guest.role, "ssh_port": guest.ssh_port, "uuid": guest.uuid,
            "private": [{"netdev": link.netdev, "address": link.address, "peer": link.peer, "mac": link.mac}
                        for link in guest.links],
            "drives": [{"serial": d.serial, "by_id": d.by_id} for d in guest.drives]}


def lab_arrays(state: LabState) -> list[dict]:
    """One array per target-initiator link, over that link's share of the target's drives (round
    robin). The default lab (one target, one initiator) is one array 'kvtier' over all drives."""
    arrays = []
    for target in (g for g in state.guests if g.role == "target"):
        links = target.links
        for k, link in enumerate(links):
            drives = target.drives[k::len(links)]
            if not drives:
                continue
            name = "kvtier" if len(state.guests) == 2 else f"kvtier-{target.name}-{link.peer}"
            arrays.append({
                "name": name, "target": target.name, "nqn": f"{NQN_PREFIX}:{state.name}.{name}",
                "transport": "rdma", "listen": {"address": link.address.split("/")[0], "port": LISTEN_PORT},
                "drives": [{"serial": d.serial} for d in drives], "initiators": [link.peer],
                "raid": {"chunk": "64K", "metadata": "1.2"},
                "filesystem": {"type": "xfs", "label": "kvtier" if name == "kvtier" else f"kvtier{link.index}",
                               "mount": f"/mnt/{name}",
                               "options": ["noatime", "logbsize=256k", "largeio", "swalloc"]},
            })
    return arrays
