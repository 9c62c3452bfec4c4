"""Names derived from the array, so that members and filesystems keep them across rebuilds.

Namespace device UUIDs, the md array UUID and the XFS UUID are all uuid5 of the array's subsystem NQN
(plus the drive's serial or by-id). The initiator then names members `/dev/disk/by-id/nvme-uuid.<uuid>`
before they even exist, and fstab and mdadm.conf can be written from the inventory alone.
"""

from __future__ import annotations

import uuid

from fxctl.inventory.model import ArraySpec, Drive

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


def port_id(array: ArraySpec, arrays: tuple[ArraySpec, ...]) -> int:
    """Port ids shared by arrays with the same listen address/port/transport on one target."""
    endpoints: list[tuple] = []
    for other in arrays:
        if other.target != array.target:
            continue
        key = (other.transport, other.listen_address, other.listen_port)
        if key not in endpoints:
            endpoints.append(key)
    return endpoints.index((array.transport, array.listen_address, array.listen_port)) + 1


def marker(array: ArraySpec) -> str:
    """The tag on lines fxctl manages in fstab, mdadm.conf and discovery.conf."""
    return f"fxctl:{array.name}"
