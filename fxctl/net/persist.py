"""Persisting the network state: NIC QoS, MTU, rxe devices and RDMA-CM defaults vanish at reboot.

`fxctl net apply` writes the resolved desired state as JSON, fxctl's re-apply script and a oneshot unit
(fxctl-net.service) that runs it at boot, before the storage services.
"""

from __future__ import annotations

import json

from fxctl import data
from fxctl.engine.plan import Operation
from fxctl.net.desired import Knobs, Nic
from fxctl.ops.files import ensure_file

CONFIG_PATH = "/etc/fxctl/net.json"
SCRIPT_PATH = "/usr/local/lib/fxctl/net-apply.py"
UNIT_NAME = "fxctl-net.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"


def state_json(knobs: Knobs, nics: list[Nic]) -> str:
    """What the boot script re-applies, in a stable form (so an unchanged state rewrites nothing)."""
    document = {
        "mtu": knobs.mtu, "global_pause": knobs.global_pause, "pfc_priority": knobs.pfc_priority,
        "dscp_map": [list(pair) for pair in knobs.dscp_map], "trust": knobs.trust, "ets": list(knobs.ets),
        "ecn": knobs.ecn, "roce_tos": knobs.roce_tos, "roce_dscp": knobs.roce_dscp,
        "cnp_dscp": knobs.cnp_dscp, "cnp_priority": knobs.cnp_priority,
        "interfaces": [{"netdev": n.netdev, "rdma_device": n.device, "address": n.spec.address,
                        "soft_roce": n.spec.soft_roce, "driver": n.driver} for n in nics],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def persisted_files(knobs: Knobs, nics: list[Nic]) -> dict[str, tuple[str, str]]:
    return {CONFIG_PATH: (state_json(knobs, nics), "0644"),
            SCRIPT_PATH: (data.text("net_apply.py"), "0755"),
            UNIT_PATH: (data.text("fxctl-net.service"), "0644")}


def ensure_persisted(knobs: Knobs, nics: list[Nic], current: dict[str, str | None]) -> Operation:
    files = persisted_files(knobs, nics)
    stale = [path for path, (content, _) in files.items() if current.get(path) != content]
    for path, (content, mode) in files.items():
        yield from ensure_file(path, content, current.get(path), mode)
    return None if stale else f"{CONFIG_PATH} and {UNIT_NAME} are up to date"
