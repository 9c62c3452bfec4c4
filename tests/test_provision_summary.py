"""The last line of `fxctl provision`: under --check it never says "all hosts ok" while changes are pending."""

from __future__ import annotations

from fxctl.cli.provision_cmd import summary_line
from fxctl.engine.apply import HostReport, Status, StepReport
from fxctl.provision.rounds import ProvisionResult, Round


def result_with(*steps: StepReport, check: bool = True, status: Status = Status.OK) -> ProvisionResult:
    return ProvisionResult("provision", check, [Round("connect", [HostReport("initiator1", status, list(steps))])])


def test_check_with_a_pending_disconnect_names_the_host():
    pending = StepReport("kvtier: connect", Status.PENDING, commands=["nvme disconnect --nqn n", "nvme connect"])
    line = summary_line(result_with(pending), "/j")
    assert line == "provision: 1 step(s) would change; changes pending on initiator1; journal: /j"


def test_a_degraded_path_is_a_failure_not_ok():
    refused = StepReport("kvtier: connect", Status.FAILED, reason="degraded: the path ... is down")
    assert "FAILED on initiator1" in summary_line(result_with(refused, status=Status.FAILED), "/j")


def test_nothing_to_do_is_ok():
    assert summary_line(result_with(StepReport("kvtier: connect", Status.OK)), "/j").endswith(
        "0 step(s) would change; all hosts ok; journal: /j")
