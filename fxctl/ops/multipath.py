"""NVMe native multipath on an initiator: the kernel has it on, and each multipath array's subsystem uses
the inventory's I/O policy.

With nvme_core's `multipath` on (Debian's kernels: the default), every controller of one subsystem (one
per path) shares one block device per namespace (the "head", /dev/nvmeXnY), and the kernel sends I/O
down the live paths: a path that goes away costs no I/O error while another is live. md is built on
the heads (the /dev/disk/by-id/nvme-uuid.* links point at them), never on one path's device. With it
off, each path would be a device of its own and md would see every member twice: fxctl refuses.
The I/O policy lives in /sys/class/nvme-subsystem/<subsys>/iopolicy; the boot unit that re-applies
the path-loss timeouts writes it again at boot (fxctl.ops.nvme_persist).
"""

from __future__ import annotations

import re

from fxctl.engine.plan import Operation, Refused
from fxctl.remote.command import script

QUEUE_DEPTH_SINCE = (6, 11)   # Linux 6.11 added the queue-depth policy; older kernels: numa, round-robin
FALLBACK = "round-robin"


def kernel_version(release: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def iopolicy_for(wanted: str | None, release: str) -> tuple[str, str]:
    """The policy to set and why: the inventory's, or (unset) queue-depth where the kernel has it (the
    nvme-cli maintainers advise it when a path may degrade: I/O goes to the least busy path) and
    round-robin before 6.11. Refused when the inventory asks for queue-depth of a kernel without it."""
    version = kernel_version(release)
    has_queue_depth = version is not None and version >= QUEUE_DEPTH_SINCE
    if wanted is None:
        if has_queue_depth:
            return "queue-depth", "the default"
        return FALLBACK, f"the default, queue-depth, needs Linux 6.11+ (this is {release or 'unknown'})"
    if wanted == "queue-depth" and not has_queue_depth:
        raise Refused(f"connect.iopolicy queue-depth needs Linux 6.11 or later, and this host runs "
                      f"{release or 'an unknown kernel'}: set round-robin (or numa), or upgrade the kernel")
    return wanted, "the inventory's"


def ensure_enabled(multipath: dict) -> Operation:
    """nvme_core's multipath is on: checked, never changed here (a module parameter: it takes a reboot)."""
    if multipath.get("enabled") is None:
        return "nvme_core is not loaded yet (loaded with the transport; checked again after connecting)"
    if not multipath["enabled"]:
        raise Refused("native NVMe multipath is off on this host (/sys/module/nvme_core/parameters/multipath "
                      "is N): each path would be a device of its own and md would see every member twice. "
                      "Boot with nvme_core.multipath=Y (kernel command line, or `options nvme_core "
                      "multipath=Y` in /etc/modprobe.d/ and a rebuilt initramfs), or list one path only")
    return "native multipath is on (nvme_core multipath=Y)"
    yield  # a generator: checks only, never a command


_SET_IOPOLICY = r"""
nqn=$1; policy=$2
for s in /sys/class/nvme-subsystem/nvme-subsys*; do
  test "$(cat "$s/subsysnqn" 2>/dev/null)" = "$nqn" || continue
  echo "$policy" > "$s/iopolicy" || { echo "${s##*/}: this kernel refused iopolicy $policy" >&2; exit 1; }
  exit 0
done
echo "no NVMe subsystem for $nqn (not connected)" >&2; exit 1
"""


def set_iopolicy(nqn: str, policy: str):
    return script(_SET_IOPOLICY, nqn, policy, description=f"iopolicy {policy}")


def ensure_iopolicy(nqn: str, policy: str, why: str, multipath: dict) -> Operation:
    """The subsystem's iopolicy is `policy` (written after connecting when the subsystem is new)."""
    current = (multipath.get("subsystems", {}).get(nqn) or {}).get("iopolicy")
    if current == policy:
        return f"iopolicy {policy} ({why})"
    yield set_iopolicy(nqn, policy)
    return None
