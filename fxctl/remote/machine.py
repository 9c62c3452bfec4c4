"""Where commands run: one protocol for this machine and for a host over SSH.

`Machine` is what the engine (facts, operations, apply) and serve need of a place: its name, `run` of a quoted
`Command`, `write_text` and `upload`. `HostSession` (fxctl.remote.session) is a host over SSH; `LocalMachine`
is this machine, so the local path runs exactly the commands a remote host would get, journalled the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Protocol

from fxctl.remote.command import Command
from fxctl.remote.journal import RunJournal
from fxctl.remote.session import CommandFailed, RunResult, journal_result

LOCAL = "local"


class Machine(Protocol):
    """A place commands run on: this machine (LocalMachine) or a host over SSH (HostSession)."""

    name: str
    journal: RunJournal | None

    def run(self, command: Command, *, timeout: float | None = ..., check: bool = False,
            sudo: bool | None = None, stdin: str | None = None, record: bool = True) -> RunResult: ...

    def write_text(self, path: str, text: str, mode: str = "0644") -> None: ...

    def upload(self, local: Path, remote: str) -> None: ...

    def close(self) -> None: ...


class LocalMachine:
    """This machine: commands through `sh -c`, files written directly; each recorded in the run journal when
    one is given, as a remote host's commands are (fxctl.remote.session)."""

    name = LOCAL

    def __init__(self, journal: RunJournal | None = None):
        self.journal = journal

    def run(self, command: Command, *, timeout: float | None = 60, check: bool = False,
            sudo: bool | None = None, stdin: str | None = None, record: bool = True) -> RunResult:
        """As HostSession.run; `sudo` is not used here (this machine runs as the user who runs fxctl)."""
        start = time.monotonic()
        try:
            feed = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
            done = subprocess.run(["sh", "-c", command.render()], capture_output=True, text=True,
                                  timeout=timeout, **feed)
            code, out, err, timed_out = done.returncode, done.stdout, done.stderr, False
        except subprocess.TimeoutExpired as exc:
            code, timed_out = 124, True
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = f"(timed out after {timeout}s)"
        result = RunResult(LOCAL, command.masked(), code, out, err, time.monotonic() - start, timed_out)
        if self.journal and record:
            journal_result(self.journal, result, command)
        if check and not result.ok:
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
