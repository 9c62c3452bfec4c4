"""The engine end to end over real sshd hosts: plan, check, apply, verify, idempotence, failures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fxctl.engine import Status, converge
from fxctl.engine.apply import exit_code_for
from fxctl.engine.plan import run_operation
from fxctl.errors import ExitCode
from fxctl.facts.files import FileContent
from fxctl.ops.files import ensure_file, ensure_line
from fxctl.remote import sh
from fxctl.remote.journal import RunJournal
from tests.conftest import host_for

pytestmark = pytest.mark.sshd


@dataclass
class FilesRecipe:
    """Two files per host under a folder: a whole file and a managed line."""

    folder: str

    def facts(self, host):
        return {"motd": FileContent(f"{self.folder}/{host.name}.motd"),
                "tab": FileContent(f"{self.folder}/{host.name}.tab")}

    def plan(self, host, facts):
        return [run_operation("motd", ensure_file(f"{self.folder}/{host.name}.motd", f"hello {host.name}\n",
                                                  facts["motd"])),
                run_operation("tab line", ensure_line(f"{self.folder}/{host.name}.tab", "a b c", "fxctl:test",
                                                      facts["tab"]))]


@dataclass
class LyingRecipe(FilesRecipe):
    """Its command succeeds but never produces the state: apply must report 'not converged'."""

    def plan(self, host, facts):
        from fxctl.engine.plan import Step
        return [Step("never", [sh("true")]) if facts["motd"] is None else Step("never", reason="present")]


def test_check_apply_reapply(ssh_world, tmp_path):
    hosts = [host_for(ssh_world, i) for i in range(3)]
    recipe = FilesRecipe(str(tmp_path))
    check = converge(hosts, recipe, check=True)
    assert [r.status for r in check] == [Status.PENDING] * 3
    assert exit_code_for(check, check=True) == ExitCode.CHANGES_PENDING
    assert not list(tmp_path.iterdir()), "--check must change nothing"

    applied = converge(hosts, recipe)
    assert [r.status for r in applied] == [Status.CHANGED] * 3
    assert (tmp_path / "host1.motd").read_text() == "hello host1\n"
    assert (tmp_path / "host1.tab").read_text() == "a b c  # fxctl:test\n"

    journal = RunJournal(tmp_path.parent / f"{tmp_path.name}-journal" / "journal.jsonl")
    again = converge(hosts, recipe, journal=journal)
    assert [r.status for r in again] == [Status.OK] * 3
    assert all(s.status == Status.OK and s.reason for r in again for s in r.steps)
    # a converged host is read once: its two facts, no second reading after an apply that ran nothing
    assert sorted(e["host"] for e in journal.entries()) == sorted([h.name for h in hosts] * 2)
    assert exit_code_for(converge(hosts, recipe, check=True), check=True) == ExitCode.OK


def test_failing_host_stops_at_first_failure_and_keeps_others(ssh_world, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder is needed")
    hosts = [host_for(ssh_world, 0), host_for(ssh_world, 1, name="bad"), host_for(ssh_world, 2, port=1)]

    class PerHost(FilesRecipe):
        def facts(self, host):
            self.folder = str(blocked if host.name == "bad" else tmp_path)
            return FilesRecipe(self.folder).facts(host)

        def plan(self, host, facts):
            return FilesRecipe(str(blocked if host.name == "bad" else tmp_path)).plan(host, facts)

    reports = converge(hosts, PerHost(str(tmp_path)))
    by_host = {r.host: r for r in reports}
    assert [r.host for r in reports] == ["host0", "bad", "host2"]
    assert by_host["host0"].status == Status.CHANGED
    bad = by_host["bad"]
    assert bad.status == Status.FAILED
    assert [s.status for s in bad.steps] == [Status.FAILED, Status.SKIPPED]
    assert "mkdir" in bad.steps[0].reason
    assert by_host["host2"].status == Status.FAILED and "cannot connect" in by_host["host2"].error
    assert exit_code_for(reports, check=False) == ExitCode.HOST_FAILED


def test_apply_that_does_not_converge_is_a_failure(ssh_world, tmp_path):
    reports = converge([host_for(ssh_world)], LyingRecipe(str(tmp_path)))
    assert reports[0].status == Status.FAILED
    assert reports[0].error.startswith("not converged")
    assert exit_code_for(reports, check=False) == ExitCode.NOT_CONVERGED
