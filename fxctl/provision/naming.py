"""Names derived from the array, so that members and filesystems keep them across rebuilds.

Namespace device UUIDs, the md array UUID and the XFS UUID are all uuid5 of the array's subsystem NQN
(plus the drive's serial or by-id). The initiator then names members `/dev/disk/by-id/nvme-uuid.<uuid>`
before they even exist, and fstab and mdadm.conf can be written from the inventory alone.
"""

from __future__ import annotations

import uuid

from fxctl.inventory.model import ArraySpec, Drive, Listen

NAMESPACE = uuid.UUID("6f1a6c1e-5d0b-4b8e-9a57-2f6e0c1d9b10")  # fxctl's own uuid5 namespace


def drive_ref(drive: Drive) -> str:
    return f"serial:{drive.serial}" if drive.serial else f"by-id:{drive.by_id}"


def namespace_uuid(array: ArraySpec, drive: Drive) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{array.nqn}/ns/{drive_ref(drive)}"))


def member_path(array: ArraySpec, drive: Drive) -> str:
    return f"/dev/disk/by-id/nvme-uuid.{namespace_uuid(array, drive)}"


def md_uuid(array: ArraySpec) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{array.nqn}/md"))


def md_uuid_mdadm(array: ArraySpec) -> str:
    """mdadm writes UUIDs as four colon-separated groups of 8 hex digits."""
    raw = md_uuid(array).replace("-", "")
    return ":".join(raw[i:i + 8] for i in range(0, 32, 8))


def xfs_uuid(array: ArraySpec) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{array.nqn}/xfs"))


def md_device(array: ArraySpec) -> str:
    return f"/dev/md/{array.raid_name}"


def nsid(index: int) -> int:
    return index + 1


def port_id(array: ArraySpec, path: Listen, arrays: tuple[ArraySpec, ...]) -> int:
    """nvmet port ids, numbered over the target's endpoints (transport, address, port) in inventory order:
    arrays with the same endpoint share its port, and each path of a multipath array has its own."""
    endpoints: list[tuple] = []
    for other in arrays:
        if other.target != array.target:
            continue
        for each in other.listen_paths:
            key = (other.transport, each.address, each.port)
            if key not in endpoints:
                endpoints.append(key)
    return endpoints.index((array.transport, path.address, path.port)) + 1


def port_ids(array: ArraySpec, arrays: tuple[ArraySpec, ...]) -> list[int]:
    return [port_id(array, path, arrays) for path in array.listen_paths]


def marker(array: ArraySpec) -> str:
    """The tag on lines fxctl manages in fstab, mdadm.conf and discovery.conf."""
    return f"fxctl:{array.name}"


def path_marker(array: ArraySpec, index: int) -> str:
    """discovery.conf has one line per path: the first keeps the array's marker (as before multipath)."""
    return marker(array) if index == 0 else f"{marker(array)}:path{index + 1}"


def path_markers(array: ArraySpec, most: int = 16) -> list[str]:
    """Every marker a path line of this array may carry (teardown removes them all, also of paths the
    inventory no longer lists)."""
    return [path_marker(array, i) for i in range(max(most, len(array.listen_paths)))]
