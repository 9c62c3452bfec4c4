"""`fxctl provision` end to end in the QEMU lab, through the real CLI, as a new user would run it.

The tests share one lab and run in order: provision from bare over RDMA (Soft-RoCE), a second run that
changes nothing, --check that plans nothing, a host NQN outside the allowed list refused, the persisted
configuration restoring the array after the storage services restart, a busy mount refusing destroy,
destroy then provision again over TCP with the data intact, a drive holding a filesystem refused with
its data intact, and --wipe.
"""

from __future__ import annotations

import json

import pytest
import yaml

from fxctl.inventory import load_inventory_text
from fxctl.provision import naming
from fxctl.remote.command import script
from tests.lab.conftest import fxctl, lab_inventory

pytestmark = pytest.mark.lab
PROVISION_TIMEOUT = 900


@pytest.fixture(scope="module")
def inventories(lab, tmp_path_factory):
    """The lab's own inventory (RDMA, its first link: one path) and a TCP variant, written to files as a user
    would."""
    data = lab_inventory(lab)
    folder = tmp_path_factory.mktemp("inventories")
    rdma = folder / "lab.yaml"
    rdma.write_text(yaml.safe_dump(data, sort_keys=False))
    one_path = rdma.read_text()
    data["arrays"][0]["transport"] = "tcp"
    tcp = folder / "lab-tcp.yaml"
    tcp.write_text(yaml.safe_dump(data, sort_keys=False))
    for guest in lab.guests():  # Soft-RoCE on the private link (what `fxctl net apply` creates)
        netdev = guest.links[0].netdev
        lab.run(guest, script('rdma link show rxe0 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev "$1"',
                              netdev))
    inventory = load_inventory_text(one_path)
    return {"rdma": rdma, "tcp": tcp, "array": inventory.arrays[0]}


def provision(inventory, *args):
    result = fxctl("-i", str(inventory), "-o", "json", "provision", *args, timeout=PROVISION_TIMEOUT)
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result.returncode, data, result


def changed_steps(data) -> list[str]:
    return [f"{h['host']}: {s['step']}" for r in data["rounds"] for h in r["hosts"] for s in h["steps"]
            if s["status"] in ("changed", "pending")]


def on(lab, role: str, text: str, *args, timeout: float = 120):
    return lab.run(lab.guests(role)[0], script(text, *args), timeout=timeout)


def test_provision_from_bare_over_rdma(lab, inventories):
    code, data, result = provision(inventories["rdma"])
    assert code == 0, result.stdout + result.stderr
    assert all(v["ok"] for v in data["verify"]), data["verify"]
    checks = {v["check"]: v for v in data["verify"]}
    assert "rdma" in checks["controller live"]["detail"]
    assert checks["md complete"]["detail"] == "raid0 4/4 members, chunk 65536"
    assert checks["xfs geometry"]["detail"].startswith("sunit=16 swidth=64")
    assert checks["sequential read"]["read_mb_s"] > 0
    array = inventories["array"]
    fstab = on(lab, "initiator", "cat /etc/fstab").stdout
    assert f"UUID={naming.xfs_uuid(array)} /mnt/kvtier xfs noatime,logbsize=256k,largeio,swalloc,nofail,_netdev," \
           "x-systemd.requires=nvmf-autoconnect.service,x-systemd.device-timeout=120s 0 0  # fxctl:kvtier" in fstab
    mdadm_conf = on(lab, "initiator", "cat /etc/mdadm/mdadm.conf").stdout
    assert f"ARRAY /dev/md/kvtier metadata=1.2 UUID={naming.md_uuid_mdadm(array)} name=kvtier" in mdadm_conf
    discovery = on(lab, "initiator", "cat /etc/nvme/discovery.conf").stdout
    assert "--transport rdma --traddr 10.99.0.1 --trsvcid 4420" in discovery
    exported = json.loads(on(lab, "target", "cat /etc/fxctl/nvmet.json").stdout)
    assert exported["subsystems"][0]["attr"] == {"allow_any_host": "0"}
    assert len(exported["subsystems"][0]["namespaces"]) == 4
    assert exported["ports"][0]["addr"]["trtype"] == "rdma"
    assert on(lab, "target", "systemctl is-enabled fxctl-nvmet.service").stdout.strip() == "enabled"


def test_second_run_changes_nothing_and_check_plans_nothing(lab, inventories):
    code, data, result = provision(inventories["rdma"])
    assert code == 0 and changed_steps(data) == [], changed_steps(data)
    code, data, result = provision(inventories["rdma"], "--check")
    assert code == 0 and changed_steps(data) == [], result.stdout


def test_host_nqn_outside_the_allowed_list_cannot_connect(lab, inventories):
    array = inventories["array"]
    stranger = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000dead"
    result = on(lab, "initiator", 'nvme connect -t rdma -a 10.99.0.1 -s 4420 -n "$1" -q "$2"; echo "rc=$?"',
                array.nqn, stranger)
    assert "rc=0" not in result.stdout, result.stdout
    controllers = on(lab, "initiator", "cat /sys/class/nvme/nvme*/subsysnqn").stdout.split()
    assert controllers.count(array.nqn) == 1


def test_persisted_configuration_restores_the_array(lab, inventories):
    """Take everything down by hand (as a reboot would), then let the persisted units bring it back."""
    array = inventories["array"]
    down_initiator = 'umount /mnt/kvtier && mdadm --stop /dev/md/kvtier && nvme disconnect -n "$1"'
    assert on(lab, "initiator", down_initiator, array.nqn).ok
    clear_target = r'''cd /sys/kernel/config/nvmet
rm -f ports/*/subsystems/* && for n in subsystems/*/namespaces/*; do echo 0 > $n/enable; rmdir $n; done
rm -f subsystems/*/allowed_hosts/* && rmdir subsystems/* ports/* hosts/*'''
    assert on(lab, "target", clear_target).ok
    assert on(lab, "target", "systemctl restart fxctl-nvmet.service", timeout=180).ok
    restored = on(lab, "initiator", "systemctl restart nvmf-autoconnect.service; udevadm settle; "
                  "for i in $(seq 50); do test -e /dev/md/kvtier && break; sleep 0.2; done; "
                  "mount /mnt/kvtier && findmnt -n -o SOURCE /mnt/kvtier", timeout=180)
    assert restored.ok, restored.stderr
    code, data, result = provision(inventories["rdma"], "--check")
    assert code == 0 and changed_steps(data) == [], result.stdout


def test_destroy_refuses_a_busy_mount(lab, inventories):
    on(lab, "initiator", "echo precious > /mnt/kvtier/data.txt && sync")
    on(lab, "initiator", "cd /mnt/kvtier && setsid sleep 600 </dev/null >/dev/null 2>&1 &")
    try:
        code, data, result = provision(inventories["rdma"], "--destroy")
        assert code == 1
        step = data["rounds"][0]["hosts"][0]["steps"][0]
        assert step["status"] == "failed" and "busy: held by sleep" in step["reason"]
        assert on(lab, "initiator", "findmnt /mnt/kvtier").ok, "nothing may be torn down"
    finally:
        on(lab, "initiator", "pkill -x sleep; true")


def test_destroy_then_provision_over_tcp_keeps_the_data(lab, inventories):
    code, data, result = provision(inventories["rdma"], "--destroy")
    assert code == 0, result.stdout + result.stderr
    assert not on(lab, "initiator", "findmnt /mnt/kvtier").ok
    assert on(lab, "target", "ls /sys/kernel/config/nvmet/subsystems").stdout.strip() == ""
    # the drives keep their md superblocks (and the data): the target must still not assemble them
    assert "ARRAY <ignore>" in on(lab, "target", "cat /etc/mdadm/mdadm.conf").stdout
    code, data, result = provision(inventories["tcp"])
    assert code == 0, result.stdout + result.stderr
    assert "tcp" in {v["check"]: v for v in data["verify"]}["controller live"]["detail"]
    assert on(lab, "initiator", "cat /mnt/kvtier/data.txt").stdout == "precious\n"


def test_drive_with_a_filesystem_is_refused_and_keeps_its_data(lab, inventories):
    code, _, result = provision(inventories["tcp"], "--destroy")
    assert code == 0, result.stdout
    by_id = lab.guests("target")[0].drives[-1].by_id
    prefill = 'mkfs.ext4 -q -F -L userdata "$1" && mkdir -p /mnt/u && mount "$1" /mnt/u && ' \
              'echo keep-me > /mnt/u/file && umount /mnt/u'
    assert on(lab, "target", prefill, by_id).ok
    code, data, result = provision(inventories["tcp"])
    assert code == 1
    target = next(h for r in data["rounds"] if r["round"] == "target" for h in r["hosts"])
    assert "holds ext4 (label userdata)" in target["error"] and "--wipe" in target["error"]
    assert on(lab, "target", 'mount -o ro "$1" /mnt/u && cat /mnt/u/file; umount /mnt/u', by_id).stdout == "keep-me\n"
    code, data, result = provision(inventories["tcp"], "--wipe")
    assert code == 0, result.stdout + result.stderr
    assert all(v["ok"] for v in data["verify"])
    assert not on(lab, "initiator", "test -e /mnt/kvtier/data.txt").ok, "--wipe made a fresh array"
    code, _, result = provision(inventories["tcp"], "--destroy", "--wipe")
    assert code == 0, result.stdout
    assert "ARRAY <ignore>" not in on(lab, "target", "cat /etc/mdadm/mdadm.conf").stdout, "wiped: line gone too"
