"""A session for engine tests without sshd (as fabric.testing's stand-in remotes): `LocalSession` runs each
command in a local shell, as the host would, and records what was sent. The engine only needs `host` and
`run(command, timeout=, sudo=)` returning a RunResult."""

from __future__ import annotations

import subprocess
import time
from types import SimpleNamespace

from fxctl.errors import FxError
from fxctl.remote.command import Command
from fxctl.remote.session import RunResult


class LocalSession:
    def __init__(self, name: str):
        self.host = SimpleNamespace(name=name)
        self.name = name
        self.sent: list[str] = []

    def run(self, command: Command, *, timeout: float | None = None, check: bool = False,
            sudo: bool | None = None, stdin: str | None = None, record: bool = True) -> RunResult:
        self.sent.append(command.masked())
        start = time.monotonic()
        try:
            done = subprocess.run(["sh", "-c", command.render()], input=stdin, capture_output=True, text=True,
                                  timeout=timeout)
            result = RunResult(self.host.name, command.masked(), done.returncode, done.stdout, done.stderr,
                               time.monotonic() - start)
        except subprocess.TimeoutExpired:
            result = RunResult(self.host.name, command.masked(), 124, "", "", time.monotonic() - start, True)
        if check and not result.ok:
            raise FxError(result.describe_failure())
        return result
