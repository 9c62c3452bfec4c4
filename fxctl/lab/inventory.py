"""The running lab as an fxctl inventory (the schema of examples/inventory.yaml), host keys pinned."""

from __future__ import annotations

from fxctl.lab.access import client_key, guest_host_key, known_hosts_file
from fxctl.lab.ports import LOOPBACK
from fxctl.lab.state import GuestRecord, LabState

NQN_PREFIX = "nqn.2026-11.io.fxctl.lab"


# The lab tears arrays down and builds them again within seconds, and its guests boot with nvmf-autoconnect
# only: a controller that reconnects forever (the product default, ctrl_loss_tmo -1) outlives a torn-down
# target there, and what nvme-cli cannot pass (both -1 and fast_io_fail_tmo) is missing after a restart of
# the autoconnect unit. The lab keeps the values its tests were built on: give up after 60 s, no early I/O fail.
LAB_CONNECT = {"ctrl_loss_tmo": 60, "fast_io_fail_tmo": -1}


def render_inventory(state: LabState) -> dict:
    """hosts (127.0.0.1 + forwarded port, pinned host key), arrays, network (rxe on the private
    links) and `lab:` facts (each guest's private-link addresses, ports, drives). What the lab leaves at
    fxctl's defaults (user root, rdma on port 4420, 64K chunks, MTU 9000, ...) is not written: those are
    declared once, in fxctl.inventory.model."""
    return {
        "version": 1,
        "defaults": {"key": str(client_key(state)), "known_hosts": str(known_hosts_file(state))},
        "hosts": {g.name: _host(state, g) for g in state.guests},
        "arrays": lab_arrays(state),
        "network": {"interfaces": {g.name: [{"netdev": link.netdev, "address": link.address, "soft_roce": True}
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
    """One array per target-initiator pair, over that pair's share of the target's drives (round
    robin). The default lab (one target, one initiator) is one array 'kvtier' over all drives. A pair
    joined by several links (`fxctl lab up --paths N`) gets a multipath array: one path per link, each
    bound to the initiator's interface on it."""
    arrays = []
    for target in (g for g in state.guests if g.role == "target"):
        peers = list(dict.fromkeys(link.peer for link in target.links))
        for k, peer in enumerate(peers):
            drives = target.drives[k::len(peers)]
            links = [link for link in target.links if link.peer == peer]
            if not drives:
                continue
            first = links[0]
            name = "kvtier" if len(state.guests) == 2 else f"kvtier-{target.name}-{peer}"
            listen = ({"listen": {"address": first.address.split("/")[0]}} if len(links) == 1 else
                      {"paths": [{"address": link.address.split("/")[0], "interface": _peer_netdev(state, peer, link)}
                                 for link in links]})
            arrays.append({
                "name": name, "target": target.name, "nqn": f"{NQN_PREFIX}:{state.name}.{name}", **listen,
                "drives": [{"serial": d.serial} for d in drives], "initiators": [peer],
                "filesystem": {"label": "kvtier" if name == "kvtier" else f"kvtier{first.index}",
                               "mount": f"/mnt/{name}"},
                "connect": LAB_CONNECT,
            })
    return arrays


def _peer_netdev(state: LabState, peer: str, link) -> str:
    """The initiator's interface on the same private link."""
    guest = state.guest(peer)
    return next(own.netdev for own in guest.links if own.index == link.index)
