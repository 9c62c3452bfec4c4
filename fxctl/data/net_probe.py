#!/usr/bin/python3
"""fxctl net verify's probe: every RDMA port of this host as JSON on stdout.

Sent by `fxctl net verify` and run with the host's own python3 (`python3 - < net_probe.py`). Uses pyverbs
(rdma-core's bindings, Debian python3-pyverbs) when importable, else sysfs, `rdma -j link` and
`ibv_devinfo`. Reports per port: state, active MTU, link layer, GIDs (index, address, type, netdev) and
counters (hw_counters; `ethtool -S` pause/CNP/ECN counters of the netdev where the NIC has them).
Standard library only; reads, never writes.
"""

import glob
import json
import os
import re
import subprocess
import sys

IB = "/sys/class/infiniband"
PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
MTUS = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
LINK_LAYERS = {0: "Unspecified", 1: "InfiniBand", 2: "Ethernet"}
GID_TYPES_SYSFS = {0: "IB/RoCE v1", 1: "RoCE v2"}   # ibv_query_gid_type() answers in this enum
ETHTOOL_COUNTER = re.compile(r"pause|cnp|ecn|discard|out_of_buffer", re.I)
MAX_GIDS = 32


def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def run(*argv):
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def sysfs_gids(device, port, limit):
    gids = []
    for index in range(limit):
        base = f"{IB}/{device}/ports/{port}"
        gid = read(f"{base}/gids/{index}")
        kind = read(f"{base}/gid_attrs/types/{index}")
        if not gid or kind is None or set(gid) <= set("0:"):
            continue
        gids.append({"index": index, "gid": gid, "type": kind, "netdev": read(f"{base}/gid_attrs/ndevs/{index}")})
    return gids


def counters(device, port):
    found = {}
    for folder in ("hw_counters", "counters"):
        for path in glob.glob(f"{IB}/{device}/ports/{port}/{folder}/*"):
            value = read(path)
            if value is not None and value.lstrip("-").isdigit():
                found[os.path.basename(path)] = int(value)
    return found


def ethtool_counters(netdev):
    text = run("ethtool", "-S", netdev) if netdev else None
    found = {}
    for line in (text or "").splitlines():
        name, _, value = line.strip().partition(":")
        if ETHTOOL_COUNTER.search(name) and value.strip().isdigit():
            found[f"ethtool:{name.strip()}"] = int(value)
    return found


def rdma_links():
    text = run("rdma", "-j", "link", "show")
    links = {}
    for link in json.loads(text or "[]"):
        links[(link["ifname"], int(link["port"]))] = link
    return links


def devinfo_mtu(device, port):
    text = run("ibv_devinfo", "-d", device, "-i", str(port)) or ""
    match = re.search(r"active_mtu:\s*(\d+)", text)
    return int(match.group(1)) if match else None


def probe_pyverbs():
    from pyverbs.device import Context, get_device_list

    ports = []
    for dev in get_device_list():
        name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
        ctx = Context(name=name)
        try:
            for port in range(1, ctx.query_device().phys_port_cnt + 1):
                attr = ctx.query_port(port)
                gids = []
                for index in range(min(attr.gid_tbl_len, MAX_GIDS)):
                    try:
                        gid = str(ctx.query_gid(port, index).gid)
                        kind = ctx.query_gid_type(port, index)
                    except Exception:  # an unset entry raises on some providers
                        continue
                    if set(gid) <= set("0:"):
                        continue
                    gids.append({"index": index, "gid": gid, "type": GID_TYPES_SYSFS.get(kind, str(kind)),
                                 "netdev": read(f"{IB}/{name}/ports/{port}/gid_attrs/ndevs/{index}")})
                ports.append({"device": name, "port": port, "state": PORT_STATES.get(attr.state, str(attr.state)),
                              "active_mtu": MTUS.get(attr.active_mtu), "link_layer":
                              LINK_LAYERS.get(attr.link_layer, str(attr.link_layer)), "gids": gids})
        finally:
            ctx.close()
    return ports


def probe_sysfs():
    ports = []
    for base in sorted(glob.glob(f"{IB}/*/ports/*")):
        device, port = base.split("/")[-3], int(base.split("/")[-1])
        state = (read(f"{base}/state") or "").split(":")[-1].strip() or None
        ports.append({"device": device, "port": port, "state": state, "active_mtu": devinfo_mtu(device, port),
                      "link_layer": read(f"{base}/link_layer"), "gids": sysfs_gids(device, port, MAX_GIDS)})
    return ports


def main():
    try:
        ports, source = probe_pyverbs(), "pyverbs"
    except ImportError:
        ports, source = probe_sysfs(), "sysfs"
    links = rdma_links()
    for entry in ports:
        link = links.get((entry["device"], entry["port"]), {})
        netdev = link.get("netdev") or next((g["netdev"] for g in entry["gids"] if g["netdev"]), None)
        entry["netdev"] = netdev
        entry["counters"] = {**counters(entry["device"], entry["port"]), **ethtool_counters(netdev)}
    json.dump({"probe": source, "ports": ports}, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
