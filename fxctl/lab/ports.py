"""Loopback ports for a lab: probed free, never one another lab on this machine has recorded."""

from __future__ import annotations

import errno
import fcntl
import socket
from contextlib import contextmanager
from pathlib import Path

from fxctl.errors import FxError

LOOPBACK = "127.0.0.1"


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when a listener could bind the port now (SO_REUSEADDR, as QEMU binds: TIME_WAIT is free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def probe_free_port(host: str = LOOPBACK) -> int:
    """A port the kernel calls free right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def allocate_ports(count: int, taken: set[int], *, attempts: int = 200) -> list[int]:
    """`count` distinct free loopback ports, none of them in `taken` (ports other labs recorded)."""
    chosen: list[int] = []
    for _ in range(attempts):
        if len(chosen) == count:
            break
        port = probe_free_port()
        if port not in taken and port not in chosen:
            chosen.append(port)
    if len(chosen) < count:
        raise FxError(f"found only {len(chosen)} of {count} free loopback ports",
                      "stop other labs (fxctl lab down --name NAME) or free some ports")
    return chosen


@contextmanager
def port_lock(folder: Path):
    """Serialise port choice and QEMU start between labs started at the same time."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
