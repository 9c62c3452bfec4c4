#!/usr/bin/python3
"""fxctl: re-apply the RoCEv2 network state of /etc/fxctl/net.json at boot (fxctl-net.service).

Written by `fxctl net apply`. NIC QoS (PFC, DSCP map, trust, ETS, ECN), MTU, Soft-RoCE devices and the
RDMA-CM defaults do not survive a reboot. Every setting is tried; one the NIC lacks (virtio has no DCB)
is logged and skipped. Exit status 1 when a setting the NIC supports failed. No shell: argv lists only.
"""

import json
import os
import subprocess
import sys
import time

WAIT_S = float(os.environ.get("FXCTL_NET_WAIT", "60"))
RDMA_CM = "/sys/kernel/config/rdma_cm"
BNXT_RE = "/sys/kernel/config/bnxt_re"
failures = []


def run(*argv, optional=False):
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"fxctl-net: {' '.join(argv)}: {exc}", file=sys.stderr)
        if not optional:
            failures.append(argv)
        return None
    if done.returncode != 0:
        text = (done.stderr or done.stdout).strip()
        skipped = optional or "not supported" in text.lower()
        print(f"fxctl-net: {' '.join(argv)}: {text}{' (skipped)' if skipped else ''}", file=sys.stderr)
        if not skipped:
            failures.append(argv)
    return done


def write(path, value, optional=False):
    try:
        with open(path, "w") as handle:
            handle.write(f"{value}\n")
    except OSError as exc:
        print(f"fxctl-net: write {value} to {path}: {exc}", file=sys.stderr)
        if not optional:
            failures.append((path, value))


def wait_for_netdev(netdev):
    deadline = time.monotonic() + WAIT_S
    while not os.path.isdir(f"/sys/class/net/{netdev}"):
        if time.monotonic() > deadline:
            failures.append(("netdev", netdev))
            print(f"fxctl-net: {netdev} did not appear within {WAIT_S:.0f} s", file=sys.stderr)
            return False
        time.sleep(1)
    return True


def rdma_bound(netdev):
    done = run("rdma", "-j", "link", "show", optional=True)
    links = json.loads(done.stdout or "[]") if done and done.returncode == 0 else []
    return [link["ifname"] for link in links if link.get("netdev") == netdev]


def apply_link(state, nic):
    netdev = nic["netdev"]
    run("ip", "link", "set", "dev", netdev, "mtu", str(state["mtu"]))
    run("ip", "link", "set", "dev", netdev, "up")
    if nic.get("address"):
        shown = run("ip", "-j", "addr", "show", "dev", netdev, optional=True)
        have = {a["local"] for link in json.loads(shown.stdout or "[]") for a in link.get("addr_info", [])} \
            if shown and shown.returncode == 0 else set()
        if nic["address"].split("/")[0] not in have:
            run("ip", "addr", "add", nic["address"], "dev", netdev)
    pause = "on" if state["global_pause"] else "off"
    run("ethtool", "-A", netdev, "rx", pause, "tx", pause, optional=True)
    if nic.get("soft_roce") and not rdma_bound(netdev):
        run("rdma", "link", "add", nic["rdma_device"], "type", "rxe", "netdev", netdev)


def apply_qos(state, nic):
    netdev, prio = nic["netdev"], state["pfc_priority"]
    if nic["driver"] == "mlx5" and run("sh", "-c", "command -v mlnx_qos", optional=True).returncode == 0:
        run("mlnx_qos", "-i", netdev, "--trust", state["trust"],
            "--pfc", ",".join("1" if p == prio else "0" for p in range(8)))
        for dscp, p in state["dscp_map"]:
            run("mlnx_qos", "-i", netdev, "--dscp2prio", f"set,{dscp},{p}")
    else:
        run("dcb", "pfc", "set", "dev", netdev, "prio-pfc", "all:off", f"{prio}:on")
        run("dcb", "app", "replace", "dev", netdev, "dscp-prio", *[f"{d}:{p}" for d, p in state["dscp_map"]])
        run("dcb", "apptrust", "set", "dev", netdev, "order", state["trust"], optional=True)
        if state["ets"]:
            tsa = ["ets" if share else "strict" for share in state["ets"]]
            run("dcb", "ets", "set", "dev", netdev, "tc-tsa", *[f"{i}:{t}" for i, t in enumerate(tsa)],
                "tc-bw", *[f"{i}:{s}" for i, s in enumerate(state["ets"])])
    ecn = "1" if state["ecn"] else "0"
    if nic["driver"] == "mlx5":
        for side in ("roce_np", "roce_rp"):
            write(f"/sys/class/net/{netdev}/ecn/{side}/enable/{prio}", ecn, optional=True)
    if nic["driver"] == "bnxt" and nic.get("rdma_device"):
        folder = f"{BNXT_RE}/{nic['rdma_device']}"
        os.makedirs(folder, exist_ok=True) if os.path.isdir(BNXT_RE) else None
        cc = f"{folder}/ports/1/cc"
        for knob, value in (("ecn_enable", ecn), ("roce_prio", prio), ("roce_dscp", state["roce_dscp"]),
                            ("cnp_prio", state["cnp_priority"]), ("cnp_dscp", state["cnp_dscp"])):
            write(f"{cc}/{knob}", f"{int(value):#x}", optional=True)
        write(f"{cc}/apply", 1, optional=True)


def apply_rdma_cm(state, nic):
    device = nic.get("rdma_device")
    if not device:
        return
    run("modprobe", "rdma_cm", optional=True)
    folder = f"{RDMA_CM}/{device}"
    if not os.path.isdir(RDMA_CM):
        print(f"fxctl-net: {RDMA_CM} is absent: RDMA-CM defaults not set", file=sys.stderr)
        return
    os.makedirs(folder, exist_ok=True)
    write(f"{folder}/ports/1/default_roce_mode", "RoCE v2")
    write(f"{folder}/ports/1/default_roce_tos", state["roce_tos"])


def main(path):
    with open(path) as handle:
        state = json.load(handle)
    for nic in state["interfaces"]:
        if not wait_for_netdev(nic["netdev"]):
            continue
        apply_link(state, nic)
        apply_qos(state, nic)
        apply_rdma_cm(state, nic)
    if failures:
        print(f"fxctl-net: {len(failures)} setting(s) failed", file=sys.stderr)
        return 1
    print(f"fxctl-net: applied {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/etc/fxctl/net.json"))
