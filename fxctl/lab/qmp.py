"""A small QMP client (QEMU's JSON control protocol over a unix socket), stdlib only.

QMP is line-delimited JSON: the server greets ({"QMP": ...}), the client sends {"execute": "qmp_capabilities"},
then commands; each reply is {"return": ...} or {"error": {"class", "desc"}}, carrying the command's "id";
asynchronous events ({"event": NAME, "data": ...}) may arrive between replies and are kept for wait_event.
Every read has a deadline: a QEMU that stops answering is an error, never a hang.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from fxctl.errors import FxError

DEFAULT_TIMEOUT_S = 10.0


class QmpError(FxError):
    """QEMU refused a command, or its control socket could not be used."""


class QmpTimeout(QmpError):
    """QEMU sent nothing within the wait."""


class QmpRefused(QmpError):
    """QEMU answered a command with an error; `error_class` is QMP's (DeviceNotFound, GenericError ...)."""

    def __init__(self, message: str, error_class: str):
        super().__init__(message)
        self.error_class = error_class


class QmpClient:
    """One QMP session: `with QmpClient(path) as qmp: qmp.execute("set_link", name="link0", up=False)`."""

    def __init__(self, path: str | Path, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.path = str(path)
        self.timeout_s = timeout_s
        self.events: list[dict] = []
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._next_id = 0

    def __enter__(self) -> QmpClient:
        self.connect()
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def connect(self) -> dict:
        """Open the socket, read the greeting, leave capabilities negotiation; returns QEMU's version."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise QmpError(f"QEMU control socket {self.path}: {exc.strerror or exc}",
                           "is the guest running, and was it started by this fxctl (with -qmp)? "
                           "'fxctl lab down' then 'fxctl lab up' restarts it with one") from None
        self._sock = sock
        greeting = self._read(time.monotonic() + self.timeout_s)
        if "QMP" not in greeting:
            raise QmpError(f"{self.path} did not greet as QMP: {str(greeting)[:200]}")
        self.execute("qmp_capabilities")
        return greeting["QMP"].get("version", {})

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def execute(self, command: str, **arguments) -> object:
        """Send one command and return its "return" value; QEMU's error is raised as QmpError."""
        if self._sock is None:
            raise QmpError("QMP client is not connected")
        self._next_id += 1
        message = {"execute": command, "id": self._next_id}
        if arguments:
            message["arguments"] = arguments
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\r\n")
        except OSError as exc:
            raise QmpError(f"QMP {command}: could not send ({exc})") from None
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read(deadline)
            if "event" in reply:
                self.events.append(reply)
                continue
            if reply.get("id") not in (None, self._next_id):
                continue  # a late reply to an earlier command
            if "error" in reply:
                error = reply["error"]
                raise QmpRefused(f"QEMU refused {command}: {error.get('desc', error)} ({error.get('class', '?')})",
                                 str(error.get("class", "")))
            return reply.get("return")

    def wait_event(self, name: str, *, timeout_s: float, match: dict | None = None) -> dict | None:
        """The first event `name` whose data holds `match` (already received or arriving within timeout_s);
        None when none came in time."""
        for event in self.events:
            if _matches(event, name, match):
                self.events.remove(event)
                return event
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                message = self._read(deadline)
            except QmpTimeout:
                return None
            if _matches(message, name, match):
                return message
            if "event" in message:
                self.events.append(message)
        return None

    def _read(self, deadline: float) -> dict:
        """One JSON message, waiting at most until `deadline`."""
        assert self._sock is not None
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QmpTimeout(f"QMP on {self.path}: no answer (timed out after {self.timeout_s:.0f} s)")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise QmpTimeout(f"QMP on {self.path}: no answer (timed out after {self.timeout_s:.0f} s)") from None
            except OSError as exc:
                raise QmpError(f"QMP on {self.path}: {exc}") from None
            if not chunk:
                raise QmpError(f"QMP on {self.path}: QEMU closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise QmpError(f"QMP on {self.path}: not JSON: {line[:200]!r}") from None
        if not isinstance(message, dict):
            raise QmpError(f"QMP on {self.path}: not a JSON object: {line[:200]!r}")
        return message


def _matches(message: dict, name: str, match: dict | None) -> bool:
    if message.get("event") != name:
        return False
    data = message.get("data") or {}
    return all(data.get(k) == v for k, v in (match or {}).items())
