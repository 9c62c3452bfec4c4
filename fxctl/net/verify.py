"""`fxctl net verify`: run the probe (fxctl/data/net_probe.py) on each host with its own python3, compare
every interface of the inventory with what the host reports, and read counters before and after RDMA
traffic between the first two hosts (ibv_rc_pingpong from ibverbs-utils, over the RoCE v2 GID)."""

from __future__ import annotations

import ipaddress
import json
import time

from fxctl import data
from fxctl.inventory.model import InterfaceSpec, Inventory
from fxctl.net.apply import network_hosts
from fxctl.net.desired import check_network, interfaces_of
from fxctl.remote.command import script, sh
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts

IB_MTUS = (256, 512, 1024, 2048, 4096)
ROCE_OVERHEAD = 100     # bytes of Ethernet MTU taken by RoCE v2 headers (IP, UDP, BTH, ICRC), rounded up
PINGPONG_PORT = 18515
PINGPONG_ITERS = 100
PINGPONG_SIZE = 4096


def expected_active_mtu(mtu: int) -> int:
    """The IB MTU a RoCE port reports for a netdev MTU (9000 -> 4096, 1500 -> 1024)."""
    return max(m for m in IB_MTUS if m <= mtu - ROCE_OVERHEAD)


def gid_matches(gid: str, address: str) -> bool:
    ip = ipaddress.ip_address(address.split("/")[0])
    value = ipaddress.IPv6Address(gid)
    return value.ipv4_mapped == ip if ip.version == 4 else value == ip


def run_probe(session) -> dict:
    # the probe text travels as one quoted argument: fxctl's own constant, never inventory data (sending it
    # on stdin costs about a minute per call through the SSH layer)
    result = session.run(sh("python3", "-c", data.text("net_probe.py")), timeout=120)
    if not result.ok:
        from fxctl.errors import RemoteError
        raise RemoteError(f"{session.host.name}: the probe failed: {result.describe_failure()}",
                          "the probe needs python3 on the host (pyverbs optional)")
    return json.loads(result.stdout)


def find_port(ports: list[dict], spec: InterfaceSpec) -> dict | None:
    """The port of the interface's RDMA device, else the one bound to its netdev (a Soft-RoCE device
    created under another name counts, as apply treats it)."""
    by_device = [p for p in ports if spec.rdma_device and p["device"] == spec.rdma_device]
    by_netdev = [p for p in ports if spec.netdev and p["netdev"] == spec.netdev]
    return (by_device or by_netdev or [None])[0]


def check_interface(host: str, spec: InterfaceSpec, ports: list[dict], mtu: int) -> dict:
    """One row: the port found for the interface and what differs from the inventory ('' when ok)."""
    port = find_port(ports, spec)
    name = spec.rdma_device or spec.netdev
    if port is None:
        return {"host": host, "port": f"{name} (none)", "device": None, "state": "-", "active_mtu": "-",
                "link_layer": "-", "gid_index": None, "gid": None, "netdev": spec.netdev, "ok": False,
                "detail": f"no RDMA port on {spec.netdev or spec.rdma_device} (run `fxctl net apply`)"}
    problems = []
    if port["state"] != "ACTIVE":
        problems.append(f"state {port['state']}, want ACTIVE")
    want_mtu = expected_active_mtu(mtu)
    if port["active_mtu"] != want_mtu:
        problems.append(f"active_mtu {port['active_mtu']}, want {want_mtu} (netdev mtu {mtu})")
    if port["link_layer"] != "Ethernet":
        problems.append(f"link layer {port['link_layer']}, want Ethernet (RoCE)")
    if spec.netdev and port["netdev"] != spec.netdev:
        problems.append(f"bound to {port['netdev']}, want {spec.netdev}")
    if spec.rdma_device and port["device"] != spec.rdma_device and not spec.soft_roce:
        problems.append(f"{spec.netdev} has RDMA device {port['device']}, the inventory names {spec.rdma_device}")
    gid = None
    if spec.address:
        gid = next((g for g in port["gids"] if g["type"] == "RoCE v2" and gid_matches(g["gid"], spec.address)), None)
        if gid is None:
            problems.append(f"no RoCE v2 GID for {spec.address.split('/')[0]}")
    return {"host": host, "port": f"{port['device']}/{port['port']}", "device": port["device"],
            "state": port["state"], "active_mtu": port["active_mtu"], "link_layer": port["link_layer"],
            "gid_index": gid["index"] if gid else None, "gid": gid["gid"] if gid else None,
            "netdev": port["netdev"], "ok": not problems,
            "detail": "; ".join(problems) or (f"RoCE v2 GID {gid['index']} = {spec.address.split('/')[0]}"
                                              if gid else "no address in the inventory: GID not checked")}


def pingpong(inventory: Inventory, rows: dict[str, dict], journal: RunJournal | None) -> str:
    """RC ping-pong between the first two verified hosts over their RoCE v2 GIDs; '' when it ran."""
    pair = [h for h, row in rows.items() if row["ok"] and row["gid_index"] is not None][:2]
    if len(pair) < 2:
        return "traffic skipped: fewer than two hosts with an ACTIVE port and a RoCE v2 GID"
    server, client = pair
    server_ip = rows[server]["address"]
    body = ('command -v ibv_rc_pingpong >/dev/null || { echo "ibv_rc_pingpong not installed '
            '(package ibverbs-utils / libibverbs-utils)"; exit 127; }; '
            'if [ -n "$5" ]; then sleep 2; fi; exec timeout 90 ibv_rc_pingpong -d "$1" -g "$2" -p "$3" '
            '-n "$4" -s "$6" -m "$7" ${5:+"$5"}')

    def work(session):
        row = rows[session.host.name]
        peer = server_ip if session.host.name == client else ""
        return session.run(script(body, row["device"], row["gid_index"], PINGPONG_PORT, PINGPONG_ITERS, peer,
                                  PINGPONG_SIZE, row["active_mtu"]),
                           timeout=120)

    outcomes = run_on_hosts([inventory.hosts[server], inventory.hosts[client]], work, journal=journal)
    for name in (server, client):
        outcome = outcomes[name]
        if not outcome.ok:
            return f"traffic failed on {name}: {outcome.error}"
        if outcome.value.exit_code == 127:
            return f"traffic skipped: {name}: {outcome.value.stdout.strip() or 'ibv_rc_pingpong not installed'}"
        if not outcome.value.ok:
            return f"traffic failed on {name}: {outcome.value.describe_failure()}"
    return ""


def counter_rows(host: str, port: str, before: dict, after: dict) -> list[dict]:
    rows = []
    for name in sorted(set(before) | set(after)):
        delta = after.get(name, 0) - before.get(name, 0)
        if delta or any(k in name for k in ("pause", "cnp", "ecn")):
            rows.append({"host": host, "port": port, "counter": name, "before": before.get(name),
                         "after": after.get(name), "delta": delta})
    return rows


def verify(inventory: Inventory, *, hosts: list[str] | None = None, traffic: bool = True,
           journal: RunJournal | None = None) -> dict:
    network = check_network(inventory)
    chosen = network_hosts(inventory, hosts)
    before = run_on_hosts(chosen, run_probe, journal=journal)
    rows, problems, probes = [], [], set()
    per_host: dict[str, list[dict]] = {}   # each host's interface rows, in the inventory's order
    for host in chosen:
        outcome = before[host.name]
        if not outcome.ok:
            problems.append(f"{host.name}: {outcome.error}")
            rows.append({"host": host.name, "port": "-", "device": None, "state": "-", "active_mtu": "-",
                         "link_layer": "-", "gid_index": None, "gid": None, "netdev": None, "ok": False,
                         "detail": outcome.error})
            continue
        probes.add(outcome.value["probe"])
        for spec in interfaces_of(network, host.name):
            row = check_interface(host.name, spec, outcome.value["ports"], network.mtu)
            row["address"] = spec.address.split("/")[0] if spec.address else None
            rows.append(row)
            per_host.setdefault(host.name, []).append(row)
            if not row["ok"]:
                problems.append(f"{host.name} {row['port']}: {row['detail']}")
    traffic_note = traffic_over_each_link(inventory, per_host, journal) if traffic else "traffic not asked"
    if traffic and "traffic failed" in traffic_note:
        problems.append(traffic_note)
    time.sleep(0.2)
    after = run_on_hosts([inventory.hosts[h] for h in per_host], run_probe, journal=journal)
    counters = []
    for host, row in ((h, r) for h, host_rows in per_host.items() for r in host_rows):
        if not row["device"] or not after[host].ok:
            continue
        def counters_of(fact, port=row["port"]):
            return next((p["counters"] for p in fact.value["ports"] if f"{p['device']}/{p['port']}" == port), {})
        old, new = counters_of(before[host]), counters_of(after[host])
        counters += counter_rows(host, row["port"], old, new)
    return {"ok": not problems, "probe": ", ".join(sorted(probes)) or "none", "traffic": traffic_note,
            "ports": rows, "counters": counters, "problems": problems}


def traffic_over_each_link(inventory: Inventory, per_host: dict[str, list[dict]],
                           journal: RunJournal | None) -> str:
    """A ping-pong over each interface in turn (the first of each host, then the second ...: a multipath
    array's two RoCE ports are both tested), between the first two hosts whose port is verified."""
    notes = []
    for k in range(max((len(r) for r in per_host.values()), default=0)):
        note = pingpong(inventory, {h: r[k] for h, r in per_host.items() if len(r) > k}, journal)
        notes.append(note or f"ibv_rc_pingpong {PINGPONG_ITERS} x {PINGPONG_SIZE} B"
                     + (f" (interface {k + 1})" if k else ""))
    return "; ".join(notes) or "traffic skipped: no interface to test"
