"""Operations of an NVMe-oF initiator: identity, connection with cache-tier parameters, autoconnect."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fxctl.engine.plan import Operation, Refused
from fxctl.ops.files import ensure_file, ensure_line, with_managed_line
from fxctl.remote.command import script, sh

HOSTNQN_PATH = "/etc/nvme/hostnqn"
HOSTID_PATH = "/etc/nvme/hostid"
DISCOVERY_CONF = "/etc/nvme/discovery.conf"

# inventory key -> nvme-cli option
CONNECT_OPTIONS = {
    "nr_io_queues": "--nr-io-queues", "queue_size": "--queue-size", "keep_alive_tmo": "--keep-alive-tmo",
    "reconnect_delay": "--reconnect-delay", "ctrl_loss_tmo": "--ctrl-loss-tmo",
    "fast_io_fail_tmo": "--fast_io_fail_tmo", "tos": "--tos",
}


@dataclass(frozen=True)
class ConnectSpec:
    nqn: str
    transport: str
    address: str
    port: int
    options: tuple[tuple[str, int], ...]   # (inventory key, value), in CONNECT_OPTIONS order
    members: tuple[str, ...]                # /dev/disk/by-id/nvme-uuid.* paths that must appear


def supported(spec: ConnectSpec, accepted: list[str]) -> tuple[ConnectSpec, list[str]]:
    """The spec without the options this nvme-cli lacks, and the names of those dropped."""
    keep = tuple((k, v) for k, v in spec.options if CONNECT_OPTIONS[k] in accepted)
    dropped = [CONNECT_OPTIONS[k] for k, _ in spec.options if CONNECT_OPTIONS[k] not in accepted]
    return ConnectSpec(spec.nqn, spec.transport, spec.address, spec.port, keep, spec.members), dropped


def connect_args(spec: ConnectSpec) -> list[str]:
    args = ["--transport", spec.transport, "--traddr", spec.address, "--trsvcid", str(spec.port)]
    for key, value in spec.options:
        if key == "tos" and value < 0:
            continue
        args += [CONNECT_OPTIONS[key], str(value)]
    return args


def ensure_identity(wanted_nqn: str | None, wanted_id: str | None, current_nqn: str | None,
                    current_id: str | None) -> Operation:
    """/etc/nvme/hostnqn and hostid exist (the inventory's values, or a fresh random pair if absent)."""
    nqn = wanted_nqn or (current_nqn.strip() if current_nqn else None)
    host_id = wanted_id or (current_id.strip() if current_id else None)
    generated = uuid.uuid4()
    nqn = nqn or f"nqn.2014-08.org.nvmexpress:uuid:{generated}"
    host_id = host_id or str(generated)
    yield from ensure_file(HOSTNQN_PATH, nqn + "\n", current_nqn, "0644")
    yield from ensure_file(HOSTID_PATH, host_id + "\n", current_id, "0644")
    return f"host NQN {nqn}"


def ensure_modules(transport: str, loaded: list[str]) -> Operation:
    module = f"nvme_{transport}"
    if module in loaded:
        return f"{module} is loaded"
    yield sh("modprobe", "-a", "nvme-fabrics", module.replace("_", "-"))
    return None


def live_controllers(spec: ConnectSpec, controllers: list[dict]) -> list[dict]:
    return [c for c in controllers if c["nqn"] == spec.nqn and c["transport"] == spec.transport
            and c["address"].get("traddr") == spec.address and c["address"].get("trsvcid") == str(spec.port)]


_WAIT = r"""
tries=$1; shift
command -v udevadm >/dev/null && udevadm settle --timeout=10
i=0
while :; do
  ok=1; for p in "$@"; do test -e "$p" || ok=0; done
  [ "$ok" = 1 ] && exit 0
  i=$((i+1))
  if [ "$i" -ge "$tries" ]; then
    echo "namespaces did not appear:" >&2; for p in "$@"; do test -e "$p" || echo "  $p" >&2; done; exit 1
  fi
  sleep 0.2
done
"""


def wait_for(paths: tuple[str, ...], seconds: int = 30):
    """A command that waits until every path exists, naming the missing ones after `seconds`."""
    return script(_WAIT, seconds * 5, *paths, description="wait for namespaces")


def ensure_connected(spec: ConnectSpec, controllers: list[dict], present: list[str]) -> Operation:
    """Connected, with every namespace present. A controller that is reconnecting (connecting, resetting)
    is a degraded path, not a pending change: a disconnect would delete it, and with it a RAID0 member
    that would have come back by itself, so it is refused with what is wrong. Only a dead one is replaced."""
    found = live_controllers(spec, controllers)
    live = [c for c in found if c["state"] == "live"]
    missing = [m for m in spec.members if m not in present]
    if live and not missing:
        return f"connected ({live[0]['name']} live), {len(spec.members)} namespaces present"
    waiting = [c for c in found if c["state"] not in ("live", "dead")]
    if waiting and not live:
        states = ", ".join(f"{c['name']} {c['state']}" for c in waiting)
        raise Refused(f"degraded: the path to {spec.address}:{spec.port} is down ({states}); the kernel keeps "
                      "reconnecting until ctrl_loss_tmo, and fxctl leaves the controller alone (a disconnect "
                      "would remove a RAID0 member). Check the link and the target, then run again")
    if found and not live:
        yield sh("nvme", "disconnect", "--nqn", spec.nqn)
    if not live:
        yield sh("nvme", "connect", "--nqn", spec.nqn, *connect_args(spec))
    yield wait_for(spec.members)
    return None


def ensure_autoconnect(spec: ConnectSpec, marker: str, current: str | None) -> Operation:
    """discovery.conf names the target with the same parameters, for nvmf-autoconnect at boot."""
    return (yield from ensure_line(DISCOVERY_CONF, " ".join(connect_args(spec)), marker, current))


def with_autoconnect_line(spec: ConnectSpec, marker: str, current: str | None) -> str:
    """discovery.conf's text once this array's line is in (for the next array on the same host)."""
    return with_managed_line(current, " ".join(connect_args(spec)), marker)
