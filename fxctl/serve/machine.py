"""Where serving runs: this machine or a host over SSH, behind one small interface (run, write, upload).

Both run the same quoted `Command`s, so the local path exercises exactly what runs on a remote host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from fxctl.remote.command import Command, mask_secrets, sh, write_file
from fxctl.remote.journal import RunJournal
from fxctl.remote.session import HostSession, RunResult, tail

LOCAL = "local"


class LocalMachine:
    """This machine: commands through `sh -c`, files written directly; each recorded in the run journal when
    one is given, as a remote host's commands are (fxctl.remote.session)."""

    name = LOCAL

    def __init__(self, journal: RunJournal | None = None):
        self.journal = journal

    def run(self, command: Command, *, timeout: float | None = 60, check: bool = False) -> RunResult:
        start = time.monotonic()
        try:
            done = subprocess.run(["sh", "-c", command.render()], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
            code, out, err, timed_out = done.returncode, done.stdout, done.stderr, False
        except subprocess.TimeoutExpired as exc:
            code, timed_out = 124, True
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = f"(timed out after {timeout}s)"
        result = RunResult(LOCAL, command.masked(), code, out, err, time.monotonic() - start, timed_out)
        if self.journal:
            secrets = command.secrets()
            self.journal.record(host=LOCAL, command=result.command, exit_code=code,
                                duration_s=round(result.duration_s, 3), timed_out=timed_out,
                                stdout_tail=mask_secrets(tail(out), secrets),
                                stderr_tail=mask_secrets(tail(err), secrets))
        if check and not result.ok:
            from fxctl.remote.session import CommandFailed
            raise CommandFailed(result)
        return result

    def write_text(self, path: str, text: str, mode: str = "0644") -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
        os.chmod(path, int(mode, 8))
        if self.journal:
            self.journal.record(host=LOCAL, command=f"write {path} (mode {mode}, {len(text)} characters)", exit_code=0)

    def upload(self, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)
        if self.journal:
            self.journal.record(host=LOCAL, command=f"put {local} -> {remote}", exit_code=0)

    def close(self) -> None:
        pass


class RemoteMachine:
    """A host over SSH (fxctl.remote): host key verified, sudo when the inventory says so."""

    def __init__(self, session: HostSession):
        self.session = session
        self.name = session.host.name

    def run(self, command: Command, *, timeout: float | None = 60, check: bool = False) -> RunResult:
        return self.session.run(command, timeout=timeout, check=check)

    def write_text(self, path: str, text: str, mode: str = "0644") -> None:
        parent = path.rsplit("/", 1)[0] or "/"
        self.run(sh("mkdir", "-p", parent).then(write_file(path, text, mode)), check=True)

    def upload(self, local: Path, remote: str) -> None:
        self.run(sh("mkdir", "-p", remote.rsplit("/", 1)[0] or "/"), check=True)
        self.session.put(local, remote)

    def close(self) -> None:
        self.session.close()
