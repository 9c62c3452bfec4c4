"""The target never assembles the initiators' RAID0 from the drives it exports (issue 18: after a reboot of
the lab's target, udev's mdadm --incremental made an inactive md127 of an exported drive, which kept it busy
and failed a later --wipe). The plan writes an `ARRAY <ignore>` line for each exported array, and stops an
array the target already made only when it is the initiator's and nothing uses it. Facts are the lab's
target-converged case (tests/golden/plans) with the md state after such a reboot."""

from __future__ import annotations

import base64
import copy
import json

from fxctl.facts.md import MdArrays
from fxctl.ops import md_exported
from fxctl.provision import naming
from tests.plan_golden import PLANS, replay

CONVERGED = json.loads((PLANS / "target-converged.json").read_text())
UUID = "9c08bb0e:7e865350:ab63968f:d65e2ac9"        # kvtier's md UUID (mdadm's form), naming.md_uuid_mdadm
CONF_WITHOUT = base64.b64encode(b"HOMEHOST <system>\nMAILADDR root\n").decode()
# /sys/block/md127 after the target's boot: udev assembled kvtier's members, one of them so far (inactive)
INACTIVE = "md127\tinactive\tnvme0n1 \t\t\n"


def replay_with(case: dict, **outputs) -> dict[str, list[str] | str]:
    """A lab case replayed with some fact outputs replaced: step -> commands (or the refusal)."""
    case = copy.deepcopy(case)
    for name, stdout in outputs.items():
        case["outputs"][name] = {"stdout": stdout, "exit_code": 0}
    return {s["step"]: s.get("refusal") or s["commands"] for s in replay(case)}


def plan_with(**outputs) -> dict[str, list[str] | str]:
    return replay_with(CONVERGED, **outputs)


def test_the_lab_case_names_the_array_it_checks():
    from fxctl.inventory import load_inventory_text
    array = load_inventory_text(CONVERGED["inventory"]).arrays[0]
    assert naming.md_uuid_mdadm(array) == UUID


def test_mdadm_conf_gets_an_ignore_line_for_the_exported_array():
    plan = plan_with(**{"mdadm_conf:/etc/mdadm/mdadm.conf": CONF_WITHOUT})
    [write] = plan["kvtier: not auto-assembled here"]
    assert f"ARRAY <ignore> UUID={UUID}  # fxctl:kvtier exported" in write
    assert "HOMEHOST <system>" in write and "> /etc/mdadm/mdadm.conf.fxctl-tmp" in write, "the rest is kept"
    assert plan["initramfs"] == [], "no initramfs with mdadm in the lab"


def test_the_initramfs_is_refreshed_only_after_the_line_changed():
    plan = plan_with(**{"mdadm_conf:/etc/mdadm/mdadm.conf": CONF_WITHOUT, "initramfs": "6.1.0-57-amd64\n"})
    assert plan["initramfs"] == ["update-initramfs -u -k 6.1.0-57-amd64"]
    assert plan_with(initramfs="6.1.0-57-amd64\n")["initramfs"] == [], "converged: line already there"


def test_an_inactive_array_the_target_made_of_an_exported_drive_is_stopped():
    plan = plan_with(md_arrays=INACTIVE)
    [stop] = plan["kvtier: drives not assembled here"]
    assert 'mdadm --stop "$d"' in stop and stop.endswith("fxctl /dev/md127")   # fxctl.ops.raid.stop_array
    assert plan["kvtier: not auto-assembled here"] == [], "the line is there already (converged)"


def test_an_array_in_use_on_the_target_is_refused_not_stopped():
    plan = plan_with(md_arrays="md127\tclean\tnvme0n1 nvme1n1 nvme2n1 nvme3n1 \t\t/srv/x \n")
    refusal = plan["kvtier: drives not assembled here"]
    assert isinstance(refusal, str) and "mounted at /srv/x" in refusal and "mdadm --stop /dev/md127" in refusal


def test_an_array_holding_other_disks_too_is_refused():
    plan = plan_with(md_arrays="md5\tactive\tnvme0n1 sda1 \t\t\n")
    refusal = plan["kvtier: drives not assembled here"]
    assert isinstance(refusal, str) and "not only kvtier's md members" in refusal


def test_the_targets_own_arrays_are_left_alone():
    plan = plan_with(md_arrays="md0\tclean\tsda1 sdb1 \t\t/ \n")
    assert plan["kvtier: drives not assembled here"] == []


def test_md_arrays_parses_sysfs_lines():
    parsed = MdArrays().parse("md127\tinactive\tnvme0n1 nvme1n1 \t\t\nmd0\tclean\tsda1 \tdm-0 \t/ /srv \n")
    assert parsed == {"md127": {"state": "inactive", "members": ["nvme0n1", "nvme1n1"], "holders": [],
                                "mounts": []},
                      "md0": {"state": "clean", "members": ["sda1"], "holders": ["dm-0"], "mounts": ["/", "/srv"]}}


def test_the_ignore_line_does_not_replace_the_initiators_line():
    marker = "fxctl:kvtier"
    conf = f"ARRAY /dev/md/kvtier metadata=1.2 UUID={UUID} name=kvtier  # {marker}\n"
    after = md_exported.with_ignore_line("11111111:22222222:33333333:44444444", marker, conf)
    assert conf.strip() in after and "ARRAY <ignore> UUID=11111111" in after


def test_a_drive_blkid_finds_blank_is_blank_whatever_udevs_cache_says():
    """Lab, full lab run: the initiator zeroed its md superblocks through nvmet (no uevent on the target),
    so lsblk (udev's cache) still said linux_raid_member while blkid -p found nothing, and provision refused
    the drive. The low-level probe wins; lsblk's value counts only for a drive blkid did not probe."""
    from fxctl.provision.target import data_on
    disks = {"/dev/nvme0n1": {"fstype": "linux_raid_member", "label": "kvtier", "pttype": None,
                              "mountpoint": None, "children": []}}
    assert data_on("/dev/nvme0n1", disks, {}, {"/dev/nvme0n1": {}}) is None
    assert data_on("/dev/nvme0n1", disks, {}, {}) == "it holds linux_raid_member (label kvtier)"
    probed = {"/dev/nvme0n1": {"TYPE": "ext4", "LABEL": "userdata"}}
    assert data_on("/dev/nvme0n1", disks, {}, probed) == "it holds ext4 (label userdata)"


def test_a_drive_blkid_could_not_probe_is_not_blank():
    """blkid -p prints nothing and exits 8 for a drive with two signatures (or 4 on a read error): that is not
    a blank drive, whatever lsblk's cache says."""
    from fxctl.facts.blockdev import Signatures
    from fxctl.provision.target import data_on

    found = Signatures().parse("## /dev/nvme0n1\nPROBE_STATUS=8\n## /dev/nvme1n1\nPROBE_STATUS=2\n"
                               "## /dev/nvme2n1\nTYPE=xfs\nPROBE_STATUS=0\n")
    assert found == {"/dev/nvme0n1": {"PROBE_ERROR": "8"}, "/dev/nvme1n1": {}, "/dev/nvme2n1": {"TYPE": "xfs"}}
    disks = {f"/dev/nvme{i}n1": {"name": f"nvme{i}n1", "path": f"/dev/nvme{i}n1", "mountpoint": None,
                                 "children": [], "fstype": None, "pttype": None} for i in range(3)}
    assert "could not read its signatures (exit 8" in data_on("/dev/nvme0n1", disks, {}, found)
    assert data_on("/dev/nvme1n1", disks, {}, found) is None
    assert data_on("/dev/nvme2n1", disks, {}, found) == "it holds xfs"


TEARDOWN = json.loads((PLANS / "target-teardown-exported-wipe.json").read_text())


def teardown_with(wipe: bool, **outputs) -> dict[str, list[str] | str]:
    """`provision --destroy` on the lab's target, its mdadm.conf holding kvtier's ignore line (converged)."""
    conf = "mdadm_conf:/etc/mdadm/mdadm.conf"
    case = TEARDOWN | {"options": {"wipe": wipe}, "outputs": TEARDOWN["outputs"] | {conf: CONVERGED["outputs"][conf]}}
    return replay_with(case, **outputs)


def test_destroy_with_wipe_removes_the_ignore_line_with_the_superblocks_it_names():
    plan = teardown_with(True, initramfs="6.1.0-57-amd64\n")
    [write] = plan["kvtier: not auto-assembled here"]
    assert "> /etc/mdadm/mdadm.conf.fxctl-tmp" in write and "ARRAY <ignore>" not in write
    assert "wipefs --all" in " ".join(plan["kvtier: wipe drives"])
    assert plan["initramfs"] == ["update-initramfs -u -k 6.1.0-57-amd64"]


def test_destroy_without_wipe_keeps_the_line_that_keeps_the_target_off_the_kept_data():
    plan = teardown_with(False, initramfs="6.1.0-57-amd64\n")
    assert plan["kvtier: not auto-assembled here"] == [] and plan["initramfs"] == []
    assert "kvtier: wipe drives" not in plan
