"""Facts read in one batch come back as if each had run alone: exit code, stdout and stderr byte for byte,
a timeout as a timeout, each fact in the journal; a host that cannot run the batch gets them one by one."""

from __future__ import annotations

import pytest

from fxctl.engine.fact import Fact, gather_facts
from fxctl.engine.fact_batch import batch_command, parse_batch, run_batch
from fxctl.remote.command import script, sh
from fxctl.remote.journal import RunJournal
from tests.support.local_session import LocalSession


class JournalledSession(LocalSession):
    def __init__(self, name, journal):
        super().__init__(name)
        self.journal = journal


def test_each_command_gets_its_own_code_stdout_and_stderr():
    commands = [sh("printf", "%s", "no newline at the end"),
                script('printf "a\\n\\n"; echo warn >&2; exit 3'),
                script("printf '\\377\\376 not utf-8\\n'"),
                sh("printf", "%s", "it's: quoted; $HOME `x` \\n"),
                sh("true")]
    results = run_batch(LocalSession("h"), commands, 10, None)
    assert [(r.exit_code, r.stdout, r.stderr) for r in results] == [
        (0, "no newline at the end", ""), (3, "a\n\n", "warn\n"), (0, "\ufffd\ufffd not utf-8\n", ""),
        (0, "it's: quoted; $HOME `x` \\n", ""), (0, "", "")]
    assert [r.command for r in results] == [c.masked() for c in commands]


def test_one_session_command_for_many_facts_and_each_fact_in_the_journal(tmp_path):
    session = JournalledSession("h", RunJournal(tmp_path / "journal.jsonl"))
    results = run_batch(session, [sh("echo", "one"), sh("sh", "-c", "echo two; exit 1")], 10, None)
    assert len(session.sent) == 1 and [r.exit_code for r in results] == [0, 1]
    entries = session.journal.entries()
    assert [(e["command"], e["exit_code"], e["stdout_tail"], e["batched"]) for e in entries] == [
        ("echo one", 0, "one", 2), ("sh -c 'echo two; exit 1'", 1, "two", 2)]


def test_a_fact_that_hangs_times_out_alone():
    results = run_batch(LocalSession("h"), [sh("sleep", "5"), sh("echo", "after")], 1, None)
    assert results[0].timed_out and results[0].exit_code == 124
    assert (results[1].exit_code, results[1].stdout) == (0, "after\n")


def test_a_batch_that_does_not_report_back_runs_each_command_alone():
    assert parse_batch("@@fxctl-fact:0::\n", 2) is None          # one answer for two commands
    assert parse_batch("@@fxctl-fact:0:!!:\n", 1) is None        # not base64

    class NoBatch(LocalSession):        # a host whose shell cannot run the batch (no mktemp, say)
        def run(self, command, **kwargs):
            if command.description.endswith("facts"):
                self.sent.append(command.masked())
                return super().run(sh("false"), **kwargs)
            return super().run(command, **kwargs)

    session = NoBatch("h")
    results = run_batch(session, [sh("echo", "a"), sh("echo", "b")], 10, None)
    assert [r.stdout for r in results] == ["a\n", "b\n"]
    assert session.sent[0].startswith("sh -c") and session.sent[2:] == ["echo a", "echo b"]   # [1]: its failure


class Echo(Fact):
    def __init__(self, text, sudo=None):
        self.text = text
        self.sudo = sudo

    def command(self):
        return sh("echo", self.text)

    def parse(self, stdout, exit_code=0):
        return stdout.strip()


def test_gather_facts_sends_one_batch_per_sudo_setting():
    session = LocalSession("h")
    facts = {"a": Echo("1"), "b": Echo("2", sudo=False), "c": Echo("3"), "d": Echo("4", sudo=False)}
    assert gather_facts(session, facts) == {"a": "1", "b": "2", "c": "3", "d": "4"}
    assert len(session.sent) == 2


def test_the_batch_is_a_constant_script_with_the_commands_as_arguments():
    command = batch_command([sh("cat", "/etc/a b"), sh("echo", "x;y")], 60)
    assert command.parts[:3] == ("sh", "-c", command.parts[2]) and "/etc/a b" not in command.parts[2]
    assert command.masked().endswith("fxctl 60 'cat '\"'\"'/etc/a b'\"'\"'' 'echo '\"'\"'x;y'\"'\"''")


@pytest.mark.sshd
def test_over_ssh_the_same_answers(ssh_world):
    from fxctl.remote.session import open_session
    from tests.conftest import host_for

    with open_session(host_for(ssh_world)) as session:
        commands = [sh("echo", "one"), script("echo two >&2; exit 5")]
        batched = run_batch(session, commands, 10, None)
        alone = [session.run(c, timeout=10) for c in commands]
    assert [(r.exit_code, r.stdout, r.stderr) for r in batched] == [(r.exit_code, r.stdout, r.stderr) for r in alone]


def test_this_machine_reads_facts_as_a_host_does_and_journals_each(tmp_path):
    """One machine protocol (fxctl.remote.machine): the engine's facts run on LocalMachine as over SSH."""
    from fxctl.facts.files import FileContent
    from fxctl.remote.machine import LocalMachine

    (tmp_path / "a").write_text("here\n")
    machine = LocalMachine(RunJournal(tmp_path / "journal.jsonl"))
    facts = gather_facts(machine, {"a": FileContent(str(tmp_path / "a")), "b": FileContent(str(tmp_path / "b"))})
    assert facts == {"a": "here\n", "b": None}
    entries = machine.journal.entries()
    assert [(e["host"], e["batched"]) for e in entries] == [("local", 2), ("local", 2)]
    assert entries[0]["command"].endswith(str(tmp_path / "a"))
