"""Connect parameters reach the kernel or are refused by name (issue 18.2): nvme-cli options, else sysfs."""

from __future__ import annotations

from fxctl.engine.plan import run_operation
from fxctl.facts.nvme_host import NvmeControllers
from fxctl.ops import nvme_host
from fxctl.ops.nvme_host import ConnectSpec, ensure_timeouts, supported

NVME_CLI_23 = ["--ctrl-loss-tmo", "--keep-alive-tmo", "--nr-io-queues", "--queue-size", "--reconnect-delay", "--tos"]
OPTIONS = (("nr_io_queues", 8), ("queue_size", 128), ("keep_alive_tmo", 5), ("reconnect_delay", 2),
           ("ctrl_loss_tmo", -1), ("fast_io_fail_tmo", 5), ("tos", -1))
SPEC = ConnectSpec("nqn.2026-11.io.fxctl:kv", "rdma", "10.0.0.1", 4420, OPTIONS, ("/dev/disk/by-id/nvme-uuid.1",))


def test_an_option_nvme_cli_lacks_goes_through_sysfs_and_one_neither_takes_is_refused():
    spec, unapplied = supported(SPEC, NVME_CLI_23)
    # fast_io_fail_tmo: this nvme-cli lacks it; ctrl_loss_tmo -1: the fabrics device refuses it (EINVAL in the lab)
    assert spec.sysfs == (("fast_io_fail_tmo", 5), ("ctrl_loss_tmo", -1)) and unapplied == []
    assert "--ctrl-loss-tmo" not in nvme_host.connect_args(spec)
    old_cli = [o for o in NVME_CLI_23 if o != "--queue-size"]
    spec, unapplied = supported(SPEC, old_cli)
    step = run_operation("options", nvme_host.check_applicable(spec, unapplied))
    assert unapplied == ["queue_size"] and "connect.queue_size cannot be applied" in step.refusal


def test_tos_at_the_kernel_default_needs_no_option():
    _, unapplied = supported(SPEC, [o for o in NVME_CLI_23 if o != "--tos"])
    assert unapplied == []


def test_live_timeouts_are_compared_as_the_kernel_shows_them():
    line = "nvme0\tnqn.2026-11.io.fxctl:kv\tlive\trdma\ttraddr=10.0.0.1,trsvcid=4420\t{}\t2\t{}\n"
    wanted = {"reconnect_delay": 2, "ctrl_loss_tmo": 61, "fast_io_fail_tmo": -1}
    same = NvmeControllers().parse(line.format(62, "off"))  # 61 s is 31 attempts of 2 s: the kernel shows 62
    assert run_operation("t", ensure_timeouts(SPEC, wanted, same)).commands == []
    other = NvmeControllers().parse(line.format(600, "5"))
    commands = [c.masked() for c in run_operation("t", ensure_timeouts(SPEC, wanted, other)).commands]
    assert commands == ["printf '%s\\n' 61 > /sys/class/nvme/nvme0/ctrl_loss_tmo",
                        "printf '%s\\n' -1 > /sys/class/nvme/nvme0/fast_io_fail_tmo"]
