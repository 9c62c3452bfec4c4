"""--wipe erases all of an array's drives or none: every drive is checked before any is erased (issue 18.6).

The target side is a plan golden (tests/golden/plans/target-wipe-one-busy.json); this is the initiator side.
"""

from __future__ import annotations

from fxctl.engine.plan import run_operation
from fxctl.ops.raid import ArrayLayout, ensure_md

MEMBERS = tuple(f"/dev/disk/by-id/nvme-uuid.{i}" for i in range(3))
LAYOUT = ArrayLayout(name="kv", device="/dev/md/kv", members=MEMBERS, chunk_bytes=65536, metadata="1.2",
                     md_uuid="11111111:22222222:33333333:44444444", fs_uuid="u", fs_label="kv", mount="/mnt/kv",
                     mount_options=("noatime",), marker="fxctl:kv")
FOREIGN = {m: {"uuid": "aaaaaaaa:bbbbbbbb:cccccccc:dddddddd", "name": "old"} for m in MEMBERS}


def test_wipe_refuses_when_one_member_is_held_by_a_running_array():
    holders = {MEMBERS[2]: [{"md": "md126", "state": "clean"}]}
    step = run_operation("md", ensure_md(LAYOUT, None, FOREIGN, {}, True, {}, holders))
    assert step.refusal and not step.commands
    assert f"{MEMBERS[2]} by /dev/md126 (clean)" in step.refusal and "nothing was wiped" in step.refusal


def test_wipe_erases_every_member_at_once_when_none_is_held():
    holders = {MEMBERS[0]: [{"md": "md127", "state": "inactive"}]}  # a partial array udev made: stopped first
    step = run_operation("md", ensure_md(LAYOUT, None, FOREIGN, {}, True, {}, holders))
    commands = [c.masked() for c in step.commands]
    assert not step.refusal
    assert "mdadm --stop" in commands[0] and commands[0].endswith(" /dev/md127")   # fxctl.ops.raid.stop_array
    assert commands[1] == "mdadm --zero-superblock " + " ".join(MEMBERS)
