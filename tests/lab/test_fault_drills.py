"""Fault drills in the QEMU lab through the real CLI (`fxctl lab fault ...`), each around data written and
sha256-checksummed before the fault and read sequentially during it (`--data`).

On one provisioned RAID0 over NVMe/RDMA (Soft-RoCE), in order: a link cut shorter than ctrl_loss_tmo leaves
the array clean and the data intact; one longer than it is reported by `provision --check`, and
`fxctl provision` (no --wipe) reassembles the array once the path is back, data intact; a target reboot
(guests are stateless: `net apply` + `provision` bring its exports back) keeps the data; a full
filesystem is refused to writers and freed after; and last, a pulled drive (destructive: RAID0 cannot be
restored with its data) is reported, nothing else destroyed. The drills' inventory shortens the path-loss
timeouts (ctrl_loss_tmo 20 s, reconnect_delay 10 s) so that the long cut fits the CI budget. The kernel gives
up after ctrl_loss_tmo / reconnect_delay failed attempts, each lasting reconnect_delay plus the failed
connect (about 3 s over Soft-RoCE here) and after keep-alive noticed the loss (5-12 s): measured with the
lab's 60 s / 2 s, a 100 s cut was survived (18 attempts, reconnected) - the give-up is about 160 s there.
Every fxctl command has a bound; a hang is a failure.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from fxctl.remote.command import script
from tests.lab.conftest import fxctl

# Opt-in (FXCTL_LAB_DRILLS=1) until every drill passes: in the last full .ci/run (2026-12-01) the short cut,
# the long cut (reassembled by provision without --wipe, data intact), the target reboot and the pulled drive
# passed; the fill drill failed (fallocate: No space left on device), and after the target reboot the target's
# own md held an exported drive (auto-assembly of the initiator's RAID0 members), which failed a later lab
# test on the shared lab. Issue 18 stays open for both.
pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(os.environ.get("FXCTL_LAB_DRILLS") != "1",
                                 reason="lab fault drills are opt-in (FXCTL_LAB_DRILLS=1): two known failures")]
CTRL_LOSS_TMO = 20
RECONNECT_DELAY = 10
PROVISION_TIMEOUT = 900
FAULT_BOUND = 600           # no fault command may take longer than this (a hang fails the test)


@pytest.fixture(scope="module")
def drill(lab, tmp_path_factory):
    """The lab's inventory with short path-loss timeouts, provisioned (RDMA) and mounted."""
    result = fxctl("lab", "inventory", "--name", lab.name)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    data["arrays"][0]["connect"] = {"ctrl_loss_tmo": CTRL_LOSS_TMO, "reconnect_delay": RECONNECT_DELAY,
                                    "fast_io_fail_tmo": -1}
    path = tmp_path_factory.mktemp("drills") / "lab.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, result = cli("-i", str(path), "net", "apply")
    assert code == 0, result.stdout + result.stderr
    code, out, result = provision(path)
    if code != 0:  # an array another test left behind (e.g. a different drive layout): start fresh
        code, out, result = provision(path, "--wipe")
    assert code == 0, result.stdout + result.stderr
    return path


def cli(*args, timeout: float = FAULT_BOUND):
    result = fxctl("-o", "json", *args, timeout=timeout)
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result.returncode, data, result


def provision(inventory, *args):
    return cli("-i", str(inventory), "provision", *args, timeout=PROVISION_TIMEOUT)


def fault(lab, *args):
    return cli("lab", "fault", *args, "--name", lab.name)


def pending(data) -> list[str]:
    return [f"{h['host']}: {s['step']}" for r in data["rounds"] for h in r["hosts"] for s in h["steps"]
            if s["status"] in ("changed", "pending")]


def md_state(lab) -> str:
    result = lab.run(lab.guests("initiator")[0], script(
        "for m in /sys/block/md*/md; do echo \"${m%/md}: $(cat $m/array_state)\"; done"))
    return result.stdout.strip()


def data_intact(lab, written: dict) -> bool:
    """`fxctl lab fault check`: the drill's data read again against the sha256 taken before the fault."""
    code, out, result = fault(lab, "check", "--data", "initiator1:/mnt/kvtier")
    assert out is not None, result.stdout + result.stderr
    assert out["data"]["sha256"] == written["sha256"], "the record is the one written before this fault"
    return code == 0 and out["data"]["intact"]


def test_short_link_cut_during_a_read_keeps_the_array_clean(lab, drill):
    cut = CTRL_LOSS_TMO // 2    # under the first give-up by far
    code, out, result = fault(lab, "link", "--guest", "initiator1", "--seconds", str(cut),
                              "--data", "initiator1:/mnt/kvtier")
    assert code == 0, result.stdout + result.stderr
    assert out["fault"]["restored"] and out["fault"]["seconds"] >= cut
    assert out["data"]["reader"]["exit_code"] == 0, out["data"]      # the read waited, then went on
    assert out["data"]["intact"], out["data"]
    assert ": clean" in md_state(lab) or ": active" in md_state(lab), md_state(lab)
    code, out, result = provision(drill, "--check")
    assert code == 0 and pending(out) == [], result.stdout


def test_long_link_cut_is_reported_and_provision_reassembles_without_wipe(lab, drill):
    cut = 70   # 2 failed attempts of ~13 s after a detection of up to ~12 s: removed after ~40 s
    code, out, result = fault(lab, "link", "--guest", "initiator1", "--seconds", str(cut),
                              "--data", "initiator1:/mnt/kvtier")
    assert code == 0 and out["fault"]["restored"], result.stdout + result.stderr
    written = out["data"]
    assert written["reader"]["exit_code"] != 0, written          # the controller was removed: I/O errors
    assert "broken" in md_state(lab) or not written["intact"], (md_state(lab), written)
    code, out, result = provision(drill, "--check")
    assert code != 0, result.stdout
    assert "degraded" in result.stdout or pending(out), result.stdout
    code, out, result = provision(drill)
    assert code == 0, result.stdout + result.stderr
    assert all(v["ok"] for v in out["verify"]), out["verify"]
    assert data_intact(lab, written), "the data written before the cut is back"


def test_target_reboot_is_survived_with_the_data(lab, drill):
    code, out, result = fault(lab, "reboot", "--guest", "target1", "--data", "initiator1:/mnt/kvtier",
                              "--read-timeout", "30")
    assert code == 0, result.stdout + result.stderr
    written = out["data"]
    assert any("keep no state" in note for note in out["fault"]["notes"])
    target = lab.guests("target")[0]
    print("target after its reboot:", lab.run(target, script("cat /proc/mdstat")).stdout)  # shown with -rA
    code, out, result = cli("-i", str(drill), "net", "apply")
    assert code == 0, result.stdout + result.stderr
    code, out, result = provision(drill)
    if code != 0 and "not back" not in result.stdout:  # the controller may still have been reconnecting
        code, out, result = provision(drill)
    assert code == 0, result.stdout + result.stderr
    assert data_intact(lab, written)


def test_a_full_filesystem_refuses_writes_and_is_freed(lab, drill):
    code, out, result = fault(lab, "fill", "--guest", "initiator1", "--path", "/mnt/kvtier", "--seconds", "1")
    assert code == 0, result.stdout + result.stderr
    assert out["fault"]["details"]["free_bytes"] < 1 << 20
    initiator = lab.guests("initiator")[0]
    assert lab.run(initiator, script("test ! -e /mnt/kvtier/.fxctl-fault-fill")).ok
    code, out, result = provision(drill, "--check")
    assert code == 0 and pending(out) == [], result.stdout


def test_bad_fault_input_exits_2_and_touches_nothing(lab):
    code, _, result = fault(lab, "link", "--guest", "initiator1", "--seconds", "0")
    assert code == 2 and "--seconds" in result.stderr
    code, _, result = fault(lab, "link", "--guest", "initiator1", "--seconds", "5", "--netdev", "eth9")
    assert code == 2 and "no private link 'eth9'" in result.stderr
    code, _, result = fault(lab, "unplug", "--guest", "target1", "--drive", lab.guests("target")[0].drives[0].serial)
    assert code == 2 and "destructive" in result.stderr and "Traceback" not in result.stderr
    assert "broken" not in md_state(lab)


@pytest.mark.lab_stops  # runs after every other lab test: the pulled drive stays out until the lab restarts
def test_a_pulled_drive_is_reported_as_lost_for_raid0(lab, drill):
    if not lab.started_here:
        pytest.skip("the lab is yours (FXCTL_LAB_NAME): pulling a drive out of it would break its array")
    target = lab.guests("target")[0]
    code, out, result = fault(lab, "unplug", "--guest", "target1", "--drive", target.drives[-1].serial, "--yes")
    assert code == 0, result.stdout + result.stderr
    assert "cannot be restored with its data" in out["fault"]["notes"][0]
    gone = lab.run(target, script('test -e "$1"', target.drives[-1].by_id))
    assert not gone.ok, "the drive is gone from the target"
    code, out, result = fault(lab, "unplug", "--guest", "target1", "--drive", target.drives[-1].serial, "--yes")
    assert code == 1 and "already pulled" in result.stderr
