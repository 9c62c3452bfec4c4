"""Operations for RoCEv2 lossless networking: link (MTU, address, pause), Soft-RoCE, RDMA-CM defaults,
and QoS through the vendor-neutral `dcb`, NVIDIA's `mlnx_qos` + ECN sysfs, or Broadcom's bnxt_re configfs.

Each yields only the commands for what differs. A capability the NIC (or the host's tools) lacks is not
a success: the operation returns a reason starting with UNSUPPORTED, which `fxctl net` reports as the
status "unsupported" (and `--strict` as a failure).
"""

from __future__ import annotations

from fxctl.engine.plan import Operation, Refused
from fxctl.remote.command import sh

UNSUPPORTED = "unsupported: "
ROCE_V2 = "RoCE v2"
RDMA_CM = "/sys/kernel/config/rdma_cm"
BNXT_RE = "/sys/kernel/config/bnxt_re"


def unsupported(why: str) -> str:
    return UNSUPPORTED + why


def is_unsupported(reason: str) -> bool:
    return reason.startswith(UNSUPPORTED)


def write_value(value, path: str):
    """`echo VALUE > PATH` with both quoted (sysfs and configfs take one write per value)."""
    return sh("echo", value).write_to(path)


# ---- link -------------------------------------------------------------------------------------------

def ensure_mtu(netdev: str, mtu: int, link: dict | None) -> Operation:
    if link is None:
        raise Refused(f"netdev {netdev} does not exist on this host")
    if link["mtu"] == mtu:
        return f"{netdev} mtu {mtu}"
    yield sh("ip", "link", "set", "dev", netdev, "mtu", mtu)
    return None


def ensure_address(netdev: str, address: str | None, addresses: dict[str, str]) -> Operation:
    """The interface address (ADDR/PREFIX) is on the netdev; other addresses are left alone."""
    if not address:
        return "no address asked"
    ip = address.split("/")[0]
    if addresses.get(ip) == netdev:
        return f"{ip} is on {netdev}"
    if ip in addresses:
        raise Refused(f"{ip} is configured on {addresses[ip]}, not on {netdev}")
    yield sh("ip", "addr", "add", address, "dev", netdev)
    return None


def ensure_link_up(netdev: str, link: dict | None) -> Operation:
    if link is None:
        raise Refused(f"netdev {netdev} does not exist on this host")
    if "UP" in link.get("flags", []):
        return f"{netdev} is up"
    yield sh("ip", "link", "set", "dev", netdev, "up")
    return None


def ensure_global_pause(netdev: str, wanted: bool, pause: dict) -> Operation:
    """Global 802.3x pause off (PFC does the lossless part) -- or on, when the inventory says so."""
    if not pause.get("supported"):
        return unsupported(f"global pause on {netdev}: {pause.get('error')}")
    if pause["rx"] == wanted and pause["tx"] == wanted:
        return f"global pause {'on' if wanted else 'off'}"
    state = "on" if wanted else "off"
    yield sh("ethtool", "-A", netdev, "rx", state, "tx", state)
    return None


# ---- RDMA device ------------------------------------------------------------------------------------

def ensure_soft_roce(netdev: str, device: str, links: list[dict] | None) -> Operation:
    """An rxe device on the netdev -- unless some RDMA device is bound to it already (that one counts)."""
    if links is None:
        raise Refused("the rdma tool (iproute2) is not installed: cannot create a Soft-RoCE device")
    bound = sorted({link["device"] for link in links if link["netdev"] == netdev})
    if bound:
        return f"{', '.join(bound)} on {netdev}"
    if any(link["device"] == device for link in links):
        raise Refused(f"RDMA device {device} exists but is bound to another netdev")
    yield sh("rdma", "link", "add", device, "type", "rxe", "netdev", netdev)
    return None


def ensure_roce_defaults(device: str, port: int, tos: int, current: dict | None) -> Operation:
    """RDMA-CM uses RoCE v2 and the ToS (DSCP << 2 | ECN) by default for this device's port."""
    now = ((current or {}).get(device) or {}).get(str(port)) or {}
    folder = f"{RDMA_CM}/{device}"
    commands = []
    if now.get("mode") != ROCE_V2:
        commands.append(write_value(ROCE_V2, f"{folder}/ports/{port}/default_roce_mode"))
    if now.get("tos") != tos:
        commands.append(write_value(tos, f"{folder}/ports/{port}/default_roce_tos"))
    if not commands:
        return f"{device}/{port}: {ROCE_V2}, tos {tos}"
    if current is None:  # rdma_cm's configfs appears with the module (configfs itself must be mounted)
        yield sh("modprobe", "rdma_cm")
    yield sh("mkdir", "-p", folder)
    yield from commands
    return None


# ---- vendor-neutral dcb ------------------------------------------------------------------------------

def ensure_dcb_pfc(netdev: str, priority: int, pfc: dict) -> Operation:
    """PFC on exactly the lossless priority."""
    if not pfc.get("supported"):
        return unsupported(f"PFC on {netdev}: {pfc.get('error')}")
    wanted = [p == priority for p in range(8)]
    if list(pfc.get("prio_pfc", [])) == wanted:
        return f"PFC on priority {priority} only"
    yield sh("dcb", "pfc", "set", "dev", netdev, "prio-pfc", "all:off", f"{priority}:on")
    return None


def ensure_dcb_app(netdev: str, dscp_map: list, app: dict) -> Operation:
    """Each DSCP maps to its priority (`replace` drops another priority for the same DSCP)."""
    if not app.get("supported"):
        return unsupported(f"DSCP to priority map on {netdev}: {app.get('error')}")
    have = {(d, p) for d, p in app.get("dscp_prio", [])}
    missing = [(int(d), int(p)) for d, p in dscp_map if (int(d), int(p)) not in have]
    stale = [(d, p) for d, p in have if any(d == want for want, _ in dscp_map) and (d, p) not in
             {(int(a), int(b)) for a, b in dscp_map}]
    if not missing and not stale:
        return "DSCP " + ", ".join(f"{d}->{p}" for d, p in dscp_map)
    yield sh("dcb", "app", "replace", "dev", netdev, "dscp-prio", *[f"{d}:{p}" for d, p in dscp_map])
    return None


def ensure_dcb_trust(netdev: str, trust: str, apptrust: dict) -> Operation:
    if not apptrust.get("supported"):
        return unsupported(f"trust {trust} on {netdev}: {apptrust.get('error')}")
    if list(apptrust.get("order", [])) == [trust]:
        return f"trust {trust}"
    yield sh("dcb", "apptrust", "set", "dev", netdev, "order", trust)
    return None


def ensure_dcb_ets(netdev: str, shares: list, ets: dict) -> Operation:
    """ETS bandwidth shares per traffic class (8 values summing to 100), when the inventory gives them."""
    if not shares:
        return "no ETS shares asked"
    if not ets.get("supported"):
        return unsupported(f"ETS on {netdev}: {ets.get('error')}")
    wanted_tsa = ["ets" if share else "strict" for share in shares]
    if list(ets.get("tc_bw", [])) == list(shares) and list(ets.get("tc_tsa", [])) == wanted_tsa:
        return "ETS " + "/".join(str(s) for s in shares)
    yield sh("dcb", "ets", "set", "dev", netdev,
             "tc-tsa", *[f"{tc}:{tsa}" for tc, tsa in enumerate(wanted_tsa)],
             "tc-bw", *[f"{tc}:{share}" for tc, share in enumerate(shares)])
    return None


# ---- NVIDIA ConnectX (mlx5) --------------------------------------------------------------------------

def ensure_mlx5_qos(netdev: str, trust: str, priority: int, dscp_map: list, qos: dict | None) -> Operation:
    """mlnx_qos: trust state, PFC on the lossless priority, and each DSCP on its priority."""
    if qos is None:
        raise Refused("mlnx_qos is not installed (MLNX_OFED/DOCA): install it or set network.driver: dcb")
    args: list = []
    if qos["trust"] != trust:
        args += ["--trust", trust]
    wanted = [1 if p == priority else 0 for p in range(8)]
    if qos["pfc"] != wanted:
        args += ["--pfc", ",".join(str(v) for v in wanted)]
    remap = [(int(d), int(p)) for d, p in dscp_map if qos["dscp2prio"].get(int(d)) != int(p)]
    if not args and not remap:
        return f"trust {trust}, PFC on priority {priority} only, DSCP map as asked"
    if args:
        yield sh("mlnx_qos", "-i", netdev, *args)
    for dscp, prio in remap:  # one mapping per call: what every mlnx_qos release accepts
        yield sh("mlnx_qos", "-i", netdev, "--dscp2prio", f"set,{dscp},{prio}")
    return None


def ensure_mlx5_ecn(netdev: str, priority: int, enabled: bool, values: dict) -> Operation:
    """ECN for the RoCE priority, notification point and reaction point (OFED driver sysfs)."""
    wanted = "1" if enabled else "0"
    knobs = [f"roce_np/enable/{priority}", f"roce_rp/enable/{priority}"]
    if not any(k in values for k in knobs):
        return unsupported(f"ECN sysfs (/sys/class/net/{netdev}/ecn) is absent: needs the OFED/DOCA mlx5 driver")
    stale = [k for k in knobs if values.get(k) != wanted]
    if not stale:
        return f"ECN {'on' if enabled else 'off'} for priority {priority}"
    for knob in stale:
        yield write_value(wanted, f"/sys/class/net/{netdev}/ecn/{knob}")
    return None


# ---- Broadcom (bnxt_re) ------------------------------------------------------------------------------

def bnxt_cc_wanted(priority: int, roce_dscp: int, cnp_priority: int, cnp_dscp: int, ecn: bool) -> dict:
    return {"ecn_enable": int(ecn), "roce_prio": priority, "roce_dscp": roce_dscp,
            "cnp_prio": cnp_priority, "cnp_dscp": cnp_dscp}


def _number(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def ensure_bnxt_cc(device: str, wanted: dict, values: dict) -> Operation:
    """bnxt_re congestion control through its configfs: write what differs (in hex: the driver prints
    "%#x" and some releases parse with "%x"), then `apply`."""
    if not values:
        return unsupported(f"{BNXT_RE}/{device} is absent (bnxt_re not loaded, or configfs not mounted)")
    stale = {k: v for k, v in wanted.items() if _number(values.get(k)) != v}
    if not stale:
        return "congestion control " + ", ".join(f"{k}={v}" for k, v in wanted.items())
    folder = f"{BNXT_RE}/{device}"
    cc = f"{folder}/ports/1/cc"
    yield sh("mkdir", "-p", folder)
    for knob, value in stale.items():
        yield write_value(f"{value:#x}", f"{cc}/{knob}")
    yield write_value(1, f"{cc}/apply")
    return None

