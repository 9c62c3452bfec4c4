"""A RAID0 that lost its members when their controller was removed (a path down longer than ctrl_loss_tmo)
is reassembled by provision once every member is back with its superblock; with a member still missing it
is refused, naming it and saying what RAID0 cannot recover."""

import pytest

from fxctl.engine.plan import Refused, run_operation
from fxctl.ops.raid import ArrayLayout, ensure_md

MEMBERS = tuple(f"/dev/disk/by-id/nvme-uuid.{i}" for i in range(3))
MD_UUID = "72cb7cce:47c35ddb:a8157707:dbae9504"
LAYOUT = ArrayLayout("kvtier", "/dev/md/kvtier", MEMBERS, 65536, "1.2", MD_UUID,
                     "5e2c4d9a-0000-4000-8000-000000000001", "kvtier", "/mnt/kvtier", ("noatime",), "fxctl:kvtier")
BROKEN = {"device": "/dev/md127", "array_state": "broken", "devices": 3, "members": [], "level": "raid0"}
OURS = {"uuid": MD_UUID, "name": "kvtier", "level": "raid0"}


def test_every_member_back_unmounts_stops_and_assembles():
    holders = {MEMBERS[0]: [{"md": "md126", "state": "inactive"}]}  # udev's incremental try on the new namespaces
    step = run_operation("md", ensure_md(LAYOUT, BROKEN, dict.fromkeys(MEMBERS, OURS), {}, False, {}, holders))
    commands = [c.masked() for c in step.commands]
    assert "findmnt" in commands[0] and "umount" in commands[0] and "/dev/md127" in commands[0]
    assert "mdadm --stop" in commands[1] and "/dev/md127" in commands[1]
    assert "/dev/md126" in commands[2]
    assert commands[3] == f"mdadm --assemble /dev/md/kvtier --uuid={MD_UUID} " + " ".join(MEMBERS)
    assert not any("--create" in c or "--zero-superblock" in c or "wipefs" in c for c in commands)


def test_a_member_still_missing_is_refused_naming_it():
    examine = {MEMBERS[0]: OURS, MEMBERS[1]: None, MEMBERS[2]: OURS}
    with pytest.raises(Refused) as caught:
        list(ensure_md(LAYOUT, BROKEN, examine, {}, wipe=False))
    assert f"not back: {MEMBERS[1]}" in caught.value.args[0]
    assert "gone for good" in caught.value.args[0] and "--wipe" in caught.value.args[0]


def test_a_member_back_with_another_superblock_is_not_assembled():
    examine = {MEMBERS[0]: OURS, MEMBERS[1]: {"uuid": "0:0:0:0", "name": "other", "level": "raid1"}, MEMBERS[2]: OURS}
    with pytest.raises(Refused, match="not back"):
        list(ensure_md(LAYOUT, BROKEN, examine, {}, wipe=False))


def test_an_array_that_lost_every_member_is_found_through_sysfs_and_reassembled():
    """The lab after a link cut past ctrl_loss_tmo: the one controller held all four members, so md127 kept
    none, mdadm --detail could not read it, the fact found nothing and provision's plain assemble failed
    ("mdadm: Found some drive for an array that is already active"). MdDetail now finds it in mdadm's map
    and reports it from sysfs (this output is written after that shape, not captured)."""
    from fxctl.facts.md import MdDetail

    stdout = ("FOUND_AT=/dev/md127\nMD_DETAIL=unreadable\nSYSFS_level=raid0\nSYSFS_chunk_size=65536\n"
              "SYSFS_raid_disks=3\nSYSFS_array_state=broken\nSYSFS_metadata_version=1.2\n")
    detail = MdDetail("/dev/md/kvtier", MD_UUID).parse(stdout, 0)
    assert detail["device"] == "/dev/md127" and detail["devices"] == 3 and detail["members"] == []
    assert detail["level"] == "raid0" and detail["array_state"] == "broken"
    step = run_operation("md", ensure_md(LAYOUT, detail, dict.fromkeys(MEMBERS, OURS), {}, False, {}, {}))
    commands = [c.masked() for c in step.commands]
    assert "/dev/md127" in commands[1] and commands[-1].startswith("mdadm --assemble /dev/md/kvtier")
    assert "/run/mdadm/map" in MdDetail("/dev/md/kvtier", MD_UUID).command().masked()
