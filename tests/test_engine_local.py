"""The engine's converge logic without sshd: check, apply, verify and idempotence, the first failure stopping
a host, and 'not converged', over LocalSession (tests/support/local_session.py). The same recipes run over
real OpenSSH servers in tests/test_engine_converge.py (-m sshd)."""

from __future__ import annotations

from fxctl.engine import Status
from fxctl.engine.apply import converge_host, exit_code_for
from fxctl.errors import ExitCode
from tests.support.local_session import LocalSession
from tests.test_engine_converge import FilesRecipe, LyingRecipe


def test_check_apply_reapply(tmp_path):
    recipe = FilesRecipe(str(tmp_path))
    sessions = [LocalSession(f"host{i}") for i in range(3)]
    check = [converge_host(s, recipe, check=True) for s in sessions]
    assert [r.status for r in check] == [Status.PENDING] * 3
    assert exit_code_for(check, check=True) == ExitCode.CHANGES_PENDING
    assert not list(tmp_path.iterdir()), "--check must change nothing"

    applied = [converge_host(s, recipe, check=False) for s in sessions]
    assert [r.status for r in applied] == [Status.CHANGED] * 3
    assert (tmp_path / "host1.motd").read_text() == "hello host1\n"
    assert (tmp_path / "host1.tab").read_text() == "a b c  # fxctl:test\n"

    again = [converge_host(s, recipe, check=False) for s in sessions]
    assert [r.status for r in again] == [Status.OK] * 3
    assert all(s.status == Status.OK and s.reason for r in again for s in r.steps)
    assert exit_code_for(again, check=False) == ExitCode.OK


def test_a_host_stops_at_its_first_failure(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder is needed")
    session = LocalSession("bad")
    report = converge_host(session, FilesRecipe(str(blocked)), check=False)
    assert report.status == Status.FAILED
    assert [s.status for s in report.steps] == [Status.FAILED, Status.SKIPPED]
    assert "mkdir" in report.steps[0].reason
    assert exit_code_for([report], check=False) == ExitCode.HOST_FAILED


def test_apply_that_does_not_converge_is_a_failure(tmp_path):
    report = converge_host(LocalSession("host0"), LyingRecipe(str(tmp_path)), check=False)
    assert report.status == Status.FAILED and report.error.startswith("not converged")
    assert report.pending_after_apply == ["never"]   # the step still pending, by name: what the exit code judges
    assert exit_code_for([report], check=False) == ExitCode.NOT_CONVERGED
