"""The remote layer against real OpenSSH servers on 127.0.0.1."""

from __future__ import annotations

import pytest

from fxctl.errors import RemoteError
from fxctl.remote import sh
from fxctl.remote.hostkeys import fetch_host_key, fingerprint
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts
from fxctl.remote.session import CommandFailed, open_session
from tests.conftest import host_for
from tests.support.sshd import keygen, start_sshd

pytestmark = pytest.mark.sshd


def test_run_returns_exit_code_and_output(ssh_world):
    with open_session(host_for(ssh_world)) as session:
        result = session.run(sh("sh", "-c", "echo out; echo err >&2; exit 3"))
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok


def test_check_raises_with_command_and_tail(ssh_world):
    with open_session(host_for(ssh_world)) as session:
        with pytest.raises(CommandFailed) as info:
            session.run(sh("ls", "/no/such/dir"), check=True)
    assert "ls /no/such/dir" in info.value.message and "exited 2" in info.value.message


def test_parts_with_shell_syntax_arrive_literally(ssh_world):
    nasty = "a b; echo pwned $(id) `id` 'q' \"d\" > /tmp/x"
    with open_session(host_for(ssh_world)) as session:
        result = session.run(sh("printf", "%s", nasty), check=True)
    assert result.stdout == nasty


def test_parallel_run_one_host_failing_keeps_every_host(ssh_world, tmp_path):
    hosts = [host_for(ssh_world, i) for i in range(4)]
    hosts[2] = host_for(ssh_world, 2, port=1)  # nothing listens on port 1
    journal = RunJournal(tmp_path / "journal.jsonl")
    outcomes = run_on_hosts(hosts, lambda s: s.run(sh("hostname"), check=True).stdout.strip(), journal=journal)
    assert list(outcomes) == ["host0", "host1", "host2", "host3"]
    assert [o.ok for o in outcomes.values()] == [True, True, False, True]
    assert "cannot connect" in outcomes["host2"].error
    entries = journal.entries()
    assert sorted(e["host"] for e in entries) == ["host0", "host1", "host3"]
    assert all(e["command"] == "hostname" and e["exit_code"] == 0 for e in entries)


def test_unknown_host_key_is_refused_with_fingerprint(ssh_world, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(RemoteError) as info:
        open_session(host_for(ssh_world, known_hosts=str(empty)))
    assert "host key unknown" in info.value.message and "SHA256:" in info.value.message
    assert "fxctl inventory trust" in info.value.hint


def test_changed_host_key_in_known_hosts_is_refused(ssh_world, tmp_path):
    other = keygen(tmp_path / "other_key")
    server = ssh_world["servers"][0]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{server.port} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    with pytest.raises(RemoteError) as info:
        open_session(host_for(ssh_world, known_hosts=str(known)))
    offered = fingerprint(fetch_host_key("127.0.0.1", server.port))
    assert "CHANGED" in info.value.message
    assert f"offers ssh-ed25519 {offered}" in info.value.message and str(known) in info.value.message
    assert "fxctl inventory trust" in info.value.hint


def test_pinned_key_and_fingerprint_accepted_and_wrong_pin_refused(ssh_world, tmp_path):
    server = ssh_world["servers"][1]
    with open_session(host_for(ssh_world, 1, known_hosts=None, host_key=server.host_pub)) as session:
        assert session.run(sh("true")).ok
        fp = fingerprint(session.connection.client.get_transport().get_remote_server_key())
    with open_session(host_for(ssh_world, 1, known_hosts=None, host_key=fp)) as session:
        assert session.run(sh("true")).ok
    wrong = " ".join(keygen(tmp_path / "k").with_suffix(".pub").read_text().split()[:2])
    with pytest.raises(RemoteError) as info:
        open_session(host_for(ssh_world, 1, known_hosts=None, host_key=wrong))
    assert "CHANGED or wrong" in info.value.message


def test_changed_server_key_against_pin_is_refused(ssh_world, tmp_path):
    """The same address and port, restarted with a new host key, against the old pin."""
    world = ssh_world
    pub = world["client_key"].with_suffix(".pub")
    server = start_sshd(tmp_path / "s", "s", pub)
    pin = server.host_pub
    server.stop()
    replaced = start_sshd(tmp_path / "s2", "s", pub, host_key=keygen(tmp_path / "newkey"))
    try:
        host = host_for(world, known_hosts=None, host_key=pin, port=replaced.port, name="s")
        with pytest.raises(RemoteError, match="CHANGED"):
            open_session(host)
    finally:
        replaced.stop()


def test_timeout_marks_result_timed_out(ssh_world):
    with open_session(host_for(ssh_world)) as session:
        result = session.run(sh("sleep", "5"), timeout=1)
    assert result.timed_out and result.exit_code == 124


def test_upload_then_read_back(ssh_world, tmp_path):
    local = tmp_path / "payload.txt"
    local.write_text("fxctl upload\n")
    remote = str(tmp_path / "uploaded.txt")
    with open_session(host_for(ssh_world)) as session:
        session.put(local, remote, mode="0600")
        result = session.run(sh("stat", "-c", "%a", remote), check=True)
    assert result.stdout.strip() == "600"
    assert (tmp_path / "uploaded.txt").read_text() == "fxctl upload\n"


def test_sudo_runs_as_root_for_unprivileged_user(ssh_world, sudo_user, tmp_path):
    host = host_for(ssh_world, user=sudo_user, sudo=True)
    with open_session(host) as session:
        assert session.run(sh("id", "-un"), sudo=False, check=True).stdout.strip() == sudo_user
        as_root = session.run(sh("id", "-un"), check=True)
        assert as_root.stdout.strip() == "root"
        assert as_root.command.startswith("sudo -n -- sh -c")


def test_secret_is_masked_in_journal_but_reaches_host(ssh_world, tmp_path):
    from fxctl.remote.command import Secret

    journal = RunJournal(tmp_path / "j.jsonl")
    with open_session(host_for(ssh_world), journal=journal) as session:
        result = session.run(sh("printf", "%s", Secret("hunter2")), check=True)
    assert result.stdout == "hunter2"
    assert "hunter2" not in (tmp_path / "j.jsonl").read_text()
    assert journal.entries()[0]["command"] == "printf %s ***"
