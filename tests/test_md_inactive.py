"""An md array that never started (inactive: udev's incremental assembly, members gone before it ran) is
stopped and the array built as usual; one that ran and lost a member (broken) is refused. Found in the lab:
after a refused provision the initiator kept an inactive /dev/md127 with 0 of 3 members and every later
provision stopped there."""

import pytest

from fxctl.engine.plan import Refused, run_operation
from fxctl.ops.raid import ArrayLayout, ensure_md

MEMBERS = tuple(f"/dev/disk/by-id/nvme-uuid.{i}" for i in range(3))
LAYOUT = ArrayLayout("kvtier", "/dev/md/kvtier", MEMBERS, 65536, "1.2", "72cb7cce:47c35ddb:a8157707:dbae9504",
                     "5e2c4d9a-0000-4000-8000-000000000001", "kvtier", "/mnt/kvtier", ("noatime",), "fxctl:kvtier")


def test_an_inactive_shell_is_stopped_then_the_array_is_made():
    detail = {"device": "/dev/md127", "array_state": "inactive", "devices": 3, "members": []}
    step = run_operation("md", ensure_md(LAYOUT, detail, dict.fromkeys(MEMBERS), {}, wipe=False))
    commands = [c.masked() for c in step.commands]
    assert "mdadm --stop" in commands[0] and "/dev/md127" in commands[0] and "array_state" in commands[0]
    assert any(c.startswith("mdadm --create /dev/md/kvtier") for c in commands[1:]), commands


def test_a_broken_raid0_is_refused_not_stopped():
    detail = {"device": "/dev/md127", "array_state": "broken", "devices": 3, "members": ["/dev/nvme1n1"]}
    with pytest.raises(Refused, match="degraded"):
        list(ensure_md(LAYOUT, detail, dict.fromkeys(MEMBERS), {}, wipe=False))
