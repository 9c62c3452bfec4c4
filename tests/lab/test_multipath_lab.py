"""NVMe native multipath in the QEMU lab (issue 31): the drills' array, given its second path (the lab runs
with two private links, `fxctl lab up --paths 2`, Soft-RoCE on each), rides out a cut of one link longer
than ctrl_loss_tmo under a sequential read and writes of checksummed data: no I/O error, data intact, md
clean. `provision --check` names the degraded path during the cut; after it `fxctl provision` reconnects
the path the kernel gave up on (nothing else changes) and `--check` is clean again.

The same cut (LONG_CUT, 90 s) with the same timeouts on the one-path array is test_fault_drills' long cut
(I/O errors, array broken): both modules use the drills' connect settings. This module adds a path to the drills'
array and leaves the array with one path again when done (the lab's later users provision one path).
"""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from fxctl.remote.command import script
from tests.lab.conftest import lab_inventory
from tests.lab.test_fault_drills import (
    CTRL_LOSS_TMO,
    DATA,
    DATA_MIB,
    FAULT_BOUND,
    LONG_CUT,
    RECONNECT_DELAY,
    cli,
    fault,
    md_state,
    provision,
)

pytestmark = pytest.mark.lab
CUT = LONG_CUT


@pytest.fixture(scope="module")
def two_paths(lab, tmp_path_factory):
    """The lab's own inventory (a multipath array over both links) with the drills' timeouts, provisioned:
    the target adds a port on its second link, the initiator connects the second path (no md change)."""
    data = lab_inventory(lab, paths=2)
    array = data["arrays"][0]
    assert [p["interface"] for p in array["paths"]] == ["eth1", "eth2"], array
    array["connect"] = {"ctrl_loss_tmo": CTRL_LOSS_TMO, "reconnect_delay": RECONNECT_DELAY, "fast_io_fail_tmo": -1}
    folder = tmp_path_factory.mktemp("multipath")
    path = folder / "lab.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, result = cli("-i", str(path), "net", "apply")
    assert code == 0, result.stdout + result.stderr
    code, out, result = provision(path)
    if code != 0:   # a fresh lab (this module alone): the array does not exist yet
        code, out, result = provision(path, "--wipe")
    assert code == 0, result.stdout + result.stderr
    yield path, out
    one = dict(array, listen={"address": array["paths"][0]["address"]})
    del one["paths"]
    data["arrays"][0] = one
    single = folder / "one-path.yaml"
    single.write_text(yaml.safe_dump(data, sort_keys=False))
    initiator = lab.guests("initiator")[0]
    lab.run(initiator, script('for c in /sys/class/nvme/nvme*; do grep -q "traddr=$1," "$c/address" && '
                              'nvme disconnect --device "${c##*/}"; done\n'
                              'sed -i "/# fxctl:kvtier:path2$/d" /etc/nvme/discovery.conf; true',
                              array["paths"][1]["address"]))
    code, out, result = provision(single)    # one path again, as the later modules expect
    assert code == 0, result.stdout + result.stderr


def controllers(lab) -> list[str]:
    result = lab.run(lab.guests("initiator")[0], script(
        'for c in /sys/class/nvme/nvme*; do echo "${c##*/} $(cat $c/state) $(cat $c/address)"; done'))
    return result.stdout.strip().splitlines()


def test_two_paths_share_one_head_per_namespace_and_verify_names_both(lab, two_paths):
    inventory, provisioned = two_paths
    code, out, result = provision(inventory, "--check")
    assert code == 0, result.stdout
    live = [line for line in controllers(lab) if " live " in line]
    assert len(live) == 2, controllers(lab)
    initiator = lab.guests("initiator")[0]
    heads = lab.run(initiator, script("ls /sys/block | grep -c '^nvme[0-9]*n[0-9]*$'; "
                                      "cat /sys/class/nvme-subsystem/nvme-subsys*/iopolicy")).stdout.split()
    assert heads == ["4", "round-robin"], heads    # 4 namespaces, one block device each, not 8
    (paths,) = [v for v in provisioned["verify"] if v["check"] == "paths"]   # the fixture's provision verified
    assert paths["ok"] and "path 2 10.99.1.1:4420 via eth2" in paths["detail"], paths


def test_one_link_cut_past_ctrl_loss_tmo_costs_no_io_error_and_provision_restores_the_path(lab, two_paths):
    inventory, _ = two_paths
    answer: dict = {}
    cutting = threading.Thread(target=lambda: answer.update(zip(("code", "out", "result"), fault(
        lab, "link", "--guest", "initiator1", "--netdev", "eth1", "--seconds", str(CUT),
        "--data", DATA, "--data-mib", DATA_MIB))))
    started = time.monotonic()
    cutting.start()
    degraded = None
    while time.monotonic() - started < CUT - 10 and degraded is None:
        time.sleep(5)
        code, out, result = provision(inventory, "--check")
        if code == 1 and "degraded: the path to 10.99.0.1:4420 via eth1 is down" in result.stdout:
            degraded = time.monotonic() - started
    cutting.join(FAULT_BOUND)
    print(f"--check named the degraded path {degraded} s into the cut; controllers after: {controllers(lab)}")
    code, out, result = answer["code"], answer["out"], answer["result"]
    assert code == 0 and out["fault"]["restored"], result.stdout + result.stderr
    written = out["data"]
    print("read and writes during the cut:", written["reader"], written["writer"])
    assert degraded is not None, "provision --check never named the degraded path during the cut"
    assert written["reader"]["exit_code"] == 0 and written["writer"]["exit_code"] == 0, written
    assert written["reader"]["passes"] > 0 and written["writer"]["passes"] > 0, written
    assert written["intact"] and written["writes_intact"], written
    assert "broken" not in md_state(lab) and ("clean" in md_state(lab) or "active" in md_state(lab)), md_state(lab)
    code, out, result = provision(inventory)     # the path the kernel gave up on is connected again
    assert code == 0, result.stdout + result.stderr
    assert all(v["ok"] for v in out["verify"]), out["verify"]
    code, out, result = provision(inventory, "--check")
    assert code == 0, result.stdout
