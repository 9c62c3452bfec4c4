"""One SSH connection to one host (fabric/paramiko), with verified host keys, sudo, timeouts, upload."""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import fabric
import invoke
import paramiko

from fxctl.errors import HostKeyRefused, RemoteError
from fxctl.inventory.model import Host
from fxctl.remote.command import AsArgument, Command, mask_secrets, sh, write_file
from fxctl.remote.hostkeys import configure_client, fingerprint, known_hosts_name, known_hosts_path
from fxctl.remote.journal import RunJournal

TAIL_LINES = 20


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


@dataclass
class RunResult:
    host: str
    command: str          # masked
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def tail(self, lines: int = TAIL_LINES) -> str:
        return tail(self.stderr or self.stdout, lines)

    def describe_failure(self) -> str:
        what = "timed out" if self.timed_out else f"exited {self.exit_code}"
        last = self.tail(5)
        return f"{self.host}: `{self.command}` {what}" + (f": {last}" if last else "")


def journal_result(journal: RunJournal, result: RunResult, command: Command, **extra) -> None:
    """One command's entry in the run journal: its line as sent, exit code, time and output tails, secrets
    masked (a host over SSH, this machine and each fact of a batch alike)."""
    secrets = command.secrets()
    journal.record(host=result.host, command=result.command, exit_code=result.exit_code,
                   duration_s=round(result.duration_s, 3), timed_out=result.timed_out, **extra,
                   stdout_tail=mask_secrets(tail(result.stdout), secrets),
                   stderr_tail=mask_secrets(tail(result.stderr), secrets))


def as_sent(command: Command, host: Host, sudo: bool | None = None) -> Command:
    """The command as sent to `host`: through `sudo -n sh -c` when the host needs sudo."""
    use_sudo = host.sudo if sudo is None else sudo
    if use_sudo and host.user != "root":
        return sh("sudo", "-n", "--", "sh", "-c", AsArgument(command))
    return command


class CommandFailed(RemoteError):
    def __init__(self, result: RunResult):
        super().__init__(result.describe_failure(), "run with -v to see every command; the run journal has all output")
        self.result = result


class HostSession:
    """A live connection. Use `open_session(host)`; close it (or use it as a context manager)."""

    def __init__(self, host: Host, connection: fabric.Connection, journal: RunJournal | None):
        self.host = host
        self.connection = connection
        self.journal = journal

    @property
    def name(self) -> str:
        return self.host.name

    def __enter__(self) -> "HostSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wrap(self, command: Command, sudo: bool | None = None) -> Command:
        return as_sent(command, self.host, sudo)

    def run(self, command: Command, *, timeout: float | None = None, check: bool = False,
            sudo: bool | None = None, stdin: str | None = None, record: bool = True) -> RunResult:
        """Run a command; the result carries exit code and output. `check=True` raises on failure.
        `record=False`: the caller journals what it ran (a batch of facts records each fact)."""
        if not isinstance(command, Command):
            raise TypeError("HostSession.run takes a Command built with fxctl.remote.sh(...)")
        sent = self.wrap(command, sudo)
        start = time.monotonic()
        timed_out = False
        try:
            res = self.connection.run(sent.render(), hide=True, warn=True, timeout=timeout,
                                      in_stream=False if stdin is None else _StringStream(stdin))
            code, out, err = res.exited, res.stdout, res.stderr
        except invoke.exceptions.CommandTimedOut as exc:
            timed_out, code = True, 124
            out, err = exc.result.stdout, exc.result.stderr + f"\n(timed out after {timeout}s)"
        except (paramiko.SSHException, socket.error, EOFError) as exc:
            raise RemoteError(f"{self.host.name}: connection lost running `{command.masked()}`: {exc}") from None
        result = RunResult(self.host.name, sent.masked(), code, out, err, time.monotonic() - start, timed_out)
        if self.journal and record:
            journal_result(self.journal, result, command)
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def put(self, local: str | os.PathLike, remote: str, *, mode: str | None = None,
            sudo: bool | None = None) -> None:
        """Upload a file; through a temporary path and `install` when sudo is needed."""
        use_sudo = (self.host.sudo if sudo is None else sudo) and self.host.user != "root"
        target = f"/tmp/fxctl-upload-{uuid.uuid4().hex}" if use_sudo else remote
        start = time.monotonic()
        try:
            self.connection.put(str(local), target)
        except (OSError, paramiko.SSHException) as exc:
            raise RemoteError(f"{self.host.name}: upload of {local} to {remote} failed: {exc}") from None
        if self.journal:
            self.journal.record(host=self.host.name, command=f"put {local} -> {remote}", exit_code=0,
                                duration_s=round(time.monotonic() - start, 3))
        if use_sudo:
            install = sh("install", "-m", mode or "0644", target, remote).then(sh("rm", "-f", target))
            self.run(install, check=True, sudo=True)
        elif mode:
            self.run(sh("chmod", mode, remote), check=True)

    def write_text(self, path: str, text: str, mode: str = "0644") -> None:
        """Write a file (its folder made first), as fxctl.remote.machine.Machine asks."""
        parent = path.rsplit("/", 1)[0] or "/"
        self.run(sh("mkdir", "-p", parent).then(write_file(path, text, mode)), check=True)

    def upload(self, local: str | os.PathLike, remote: str) -> None:
        """`put` into a folder made first, as fxctl.remote.machine.Machine asks."""
        self.run(sh("mkdir", "-p", remote.rsplit("/", 1)[0] or "/"), check=True)
        self.put(local, remote)

    def close(self) -> None:
        self.connection.close()


class _StringStream:
    """A minimal stdin for invoke: reads a string once."""

    def __init__(self, text: str):
        self._data = text

    def read(self, size: int = -1) -> str:
        chunk, self._data = (self._data, "") if size < 0 else (self._data[:size], self._data[size:])
        return chunk


def open_session(host: Host, *, journal: RunJournal | None = None) -> HostSession:
    """Connect to `host`, verifying its host key; RemoteError with a hint on any refusal."""
    config = fabric.Config(lazy=True)
    config.load_ssh_configs = False
    connect_kwargs: dict = {"allow_agent": host.key is None, "look_for_keys": host.key is None}
    if host.key:
        key_path = Path(os.path.expanduser(host.key))
        if not key_path.exists():
            raise RemoteError(f"{host.name}: key file {key_path} does not exist",
                              f"fix hosts.{host.name}.key (or defaults.key) in the inventory")
        connect_kwargs["key_filename"] = str(key_path)
    conn = fabric.Connection(host.address, user=host.user, port=host.port, config=config,
                             connect_timeout=host.connect_timeout, connect_kwargs=connect_kwargs)
    configure_client(conn.client, host.name, host.host_key, host.known_hosts)
    try:
        conn.open()
    except RemoteError:
        conn.close()
        raise
    except paramiko.BadHostKeyException as exc:
        conn.close()
        known = known_hosts_path(host.known_hosts)
        raise HostKeyRefused(f"{host.name}: host key CHANGED: {host.address}:{host.port} offers "
                             f"{exc.key.get_name()} {fingerprint(exc.key)}, but {known} holds "
                             f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}",
                             "if the host was really reinstalled, check the offered fingerprint out of band, "
                             f"remove the old line (ssh-keygen -R '{known_hosts_name(host.address, host.port)}' "
                             f"-f {known}) and run `fxctl inventory trust {host.name}`; "
                             "otherwise treat this as an attack") from None
    except paramiko.AuthenticationException as exc:
        conn.close()
        raise RemoteError(f"{host.name}: authentication failed as {host.user}: {exc}",
                          "check hosts.<name>.user and key in the inventory") from None
    except (paramiko.SSHException, socket.error, EOFError) as exc:
        conn.close()
        raise RemoteError(f"{host.name}: cannot connect to {host.address}:{host.port}: {exc}",
                          "check the address and port, and that sshd runs there") from None
    return HostSession(host, conn, journal)
