"""Operations of an NVMe-oF initiator: identity, connection with cache-tier parameters, autoconnect."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

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
# what the kernel also takes through /sys/class/nvme/nvmeX/<key> on a live controller (Linux 5.11+);
# reconnect_delay first: the kernel turns ctrl_loss_tmo into a count of reconnect_delay attempts
SYSFS_OPTIONS = ("reconnect_delay", "ctrl_loss_tmo", "fast_io_fail_tmo")


@dataclass(frozen=True)
class ConnectSpec:
    nqn: str
    transport: str
    address: str
    port: int
    options: tuple[tuple[str, int], ...]   # (inventory key, value), in CONNECT_OPTIONS order
    members: tuple[str, ...]                # /dev/disk/by-id/nvme-uuid.* paths that must appear
    sysfs: tuple[tuple[str, int], ...] = ()  # options nvme-cli lacks, written to sysfs after connecting
    host_traddr: str | None = None           # the initiator's own address for this path (rdma binds to it)
    host_iface: str | None = None            # the initiator's interface for this path (tcp binds to it)
    label: str = ""                          # how messages name this path ("10.0.0.1:4420 via eth2")


def supported(spec: ConnectSpec, accepted: list[str]) -> tuple[ConnectSpec, list[str]]:
    """The spec with the options this nvme-cli lacks moved to sysfs where the kernel takes them there,
    and the inventory keys that can be applied neither way (a tos of -1, the kernel default, needs nothing)."""
    # ctrl_loss_tmo -1 (reconnect forever): nvme-cli 2.3 passes it, and the fabrics device answers EINVAL
    # ("Failed to write to /dev/nvme-fabrics: Invalid argument", seen in the lab on Linux 6.1); the
    # controller's sysfs attribute takes it, so it goes there after connecting
    forever = [(k, v) for k, v in spec.options if k == "ctrl_loss_tmo" and v < 0]
    keep = tuple((k, v) for k, v in spec.options if CONNECT_OPTIONS[k] in accepted and (k, v) not in forever)
    lacking = [(k, v) for k, v in spec.options if CONNECT_OPTIONS[k] not in accepted and not (k == "tos" and v < 0)]
    lacking += [item for item in forever if item not in lacking]
    sysfs = tuple((k, v) for k, v in lacking if k in SYSFS_OPTIONS)
    unapplied = [k for k, _ in lacking if k not in SYSFS_OPTIONS]
    return replace(spec, options=keep, sysfs=sysfs), unapplied


def check_applicable(spec: ConnectSpec, unapplied: list[str]) -> Operation:
    """Every connect parameter reaches the kernel, or the plan is refused naming the one that cannot."""
    if unapplied:
        raise Refused(f"this nvme-cli lacks {', '.join(CONNECT_OPTIONS[k] for k in unapplied)}, so connect."
                      f"{', connect.'.join(unapplied)} cannot be applied: upgrade nvme-cli, or remove the key "
                      "from the inventory to accept the kernel default")
    if spec.sysfs:
        return f"nvme connect; {', '.join(k for k, _ in spec.sysfs)} through sysfs (this nvme-cli lacks the option)"
    return "all through nvme connect"
    yield  # a generator: checks only, never a command


def attr_write(path: str, value: int):
    return sh("printf", "%s\\n", str(value)).write_to(path)


def sysfs_value(key: str, value: int) -> str:
    """The text the kernel shows for a timeout: "off" for -1 (ctrl_loss_tmo: forever, fast_io_fail_tmo:
    never fail I/O early)."""
    return "off" if value < 0 else str(value)


def ensure_timeouts(spec: ConnectSpec, wanted: dict[str, int], controllers: list[dict]) -> Operation:
    """A live controller has the inventory's path-loss timeouts; they are changed through sysfs in place
    (no reconnect). A controller connected at boot by nvmf-autoconnect lacks what nvme-cli could not pass."""
    live = [c for c in live_controllers(spec, controllers) if c["state"] == "live"]
    if not live:
        return "no live controller yet (set when connecting)"
    unreadable = []
    for controller in live:
        for key in SYSFS_OPTIONS:
            current = controller.get(key, "")
            if current == "" or key not in wanted:
                continue  # not read (an older fact) or not asked for
            if current is None:
                unreadable.append(key)
                continue
            value = wanted[key]
            if key == "ctrl_loss_tmo" and value > 0:  # the kernel keeps whole reconnect_delay attempts
                delay = max(wanted.get("reconnect_delay", 1), 1)
                value = -(-value // delay) * delay
            if current != sysfs_value(key, value):
                yield attr_write(f"/sys/class/nvme/{controller['name']}/{key}", wanted[key])
    if unreadable and any(k in dict(spec.sysfs) for k in unreadable):
        raise Refused(f"this kernel has no /sys/class/nvme/*/{'/'.join(sorted(set(unreadable)))} and this "
                      f"nvme-cli lacks the option: connect.{', connect.'.join(sorted(set(unreadable)))} cannot be "
                      "applied; upgrade nvme-cli or the kernel (5.11+), or set it to the kernel default (-1 for "
                      "fast_io_fail_tmo)")
    return f"{', '.join(c['name'] for c in live)}: " + ", ".join(
        f"{k} {sysfs_value(k, wanted[k])}" for k in SYSFS_OPTIONS if k in wanted)


_SET_TIMEOUTS = r"""
nqn=$1; shift
for c in /sys/class/nvme/nvme*; do
  test "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" || continue
  while [ $# -ge 2 ]; do
    if ! test -e "$c/$1"; then
      echo "${c##*/}: this kernel has no $c/$1 (and nvme-cli lacks the option): connect.$1 cannot be applied" >&2
      exit 1
    fi
    echo "$2" > "$c/$1" || exit 1
    shift 2
  done
  exit 0
done
echo "no controller for $nqn" >&2; exit 1
"""


def set_timeouts(spec: ConnectSpec):
    """After connecting: write what nvme-cli could not pass into the new controller's sysfs."""
    pairs = [str(part) for key, value in spec.sysfs for part in (key, value)]
    return script(_SET_TIMEOUTS, spec.nqn, *pairs, description="path-loss timeouts through sysfs")


def connect_args(spec: ConnectSpec) -> list[str]:
    args = ["--transport", spec.transport, "--traddr", spec.address, "--trsvcid", str(spec.port)]
    if spec.host_traddr:
        args += ["--host-traddr", spec.host_traddr]
    if spec.host_iface:
        args += ["--host-iface", spec.host_iface]
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
        ana = sorted(set((live[0].get("ana") or {}).values()))
        return (f"connected ({live[0]['name']} live), {len(spec.members)} namespaces present"
                + (f", ANA {'/'.join(ana)}" if ana else ""))
    waiting = [c for c in found if c["state"] not in ("live", "dead")]
    if waiting and not live:
        states = ", ".join(f"{c['name']} {c['state']}" for c in waiting)
        raise Refused(f"degraded: the path to {spec.label or f'{spec.address}:{spec.port}'} is down ({states}); "
                      "the kernel keeps reconnecting until ctrl_loss_tmo, and fxctl leaves the controller alone "
                      "(a disconnect would remove it, and with one path a RAID0 member). Check the link and the "
                      "target, then run again")
    for dead in ([c for c in found if c["state"] == "dead"] if not live else []):
        # this path's controller only: `--nqn` would also take the array's other paths away
        yield sh("nvme", "disconnect", "--device", dead["name"])
    if not live:
        yield sh("nvme", "connect", "--nqn", spec.nqn, *connect_args(spec))
        if spec.sysfs:
            yield set_timeouts(spec)
    yield wait_for(spec.members)
    return None


def ensure_autoconnect(spec: ConnectSpec, marker: str, current: str | None) -> Operation:
    """discovery.conf names the target with the same parameters, for nvmf-autoconnect at boot."""
    return (yield from ensure_line(DISCOVERY_CONF, " ".join(connect_args(spec)), marker, current))


def with_autoconnect_line(spec: ConnectSpec, marker: str, current: str | None) -> str:
    """discovery.conf's text once this array's line is in (for the next array on the same host)."""
    return with_managed_line(current, " ".join(connect_args(spec)), marker)
