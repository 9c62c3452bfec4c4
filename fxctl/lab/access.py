"""Reaching lab guests over SSH: the lab's client key, its known_hosts, and fxctl's own remote layer.

Every connection verifies the guest's host key (generated on the host, injected at boot, pinned
here); nothing ever turns host key checking off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from fxctl.errors import FxError, HostKeyRefused, RemoteError
from fxctl.inventory.model import Host
from fxctl.lab.ports import LOOPBACK
from fxctl.lab.seed import CLIENT_KEY, HOST_KEY, public_key_line
from fxctl.lab.state import GuestRecord, LabState, guest_dir
from fxctl.remote.command import sh
from fxctl.remote.hostkeys import known_hosts_name

KNOWN_HOSTS = "known_hosts"


def client_key(state: LabState) -> Path:
    return state.folder / CLIENT_KEY


def known_hosts_file(state: LabState) -> Path:
    return state.folder / KNOWN_HOSTS


def guest_host_key(state: LabState, guest: GuestRecord) -> str:
    return public_key_line(guest_dir(state.name, guest.name) / HOST_KEY)


def write_known_hosts(state: LabState) -> Path:
    lines = [f"{known_hosts_name(LOOPBACK, g.ssh_port)} {guest_host_key(state, g)}" for g in state.guests]
    path = known_hosts_file(state)
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def guest_host(state: LabState, guest: GuestRecord, *, pinned: str | None = None,
               connect_timeout: int = 10) -> Host:
    """The guest as an inventory Host, its host key pinned (the lab's own key unless `pinned`)."""
    return Host(name=guest.name, address=LOOPBACK, port=guest.ssh_port, user="root",
                key=str(client_key(state)), host_key=pinned or guest_host_key(state, guest),
                connect_timeout=connect_timeout, roles=(guest.role,), hostnqn=guest.hostnqn,
                hostid=guest.uuid)


def ssh_argv(state: LabState, guest: GuestRecord, command: list[str], *, tty: bool) -> list[str]:
    """OpenSSH client argv for `fxctl lab ssh`: the lab's key and known_hosts, strict checking."""
    argv = ["ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts_file(state)}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-i", str(client_key(state)), "-p", str(guest.ssh_port)]
    argv += ["-t"] if tty else ["-T"]
    return argv + [f"root@{LOOPBACK}", "--", *command]


def probe_guest(state: LabState, guest: GuestRecord, *, timeout: int = 10) -> str:
    """Connect through fxctl.remote with the pinned host key and run `hostname`; returns its output."""
    from fxctl.remote.session import open_session

    with open_session(guest_host(state, guest, connect_timeout=timeout)) as session:
        result = session.run(sh("hostname"), timeout=timeout, check=True)
    return result.stdout.strip()


def wait_until_answering(state: LabState, *, timeout_s: float, progress: Callable[[str], None],
                         alive: Callable[[GuestRecord], bool]) -> dict[str, float]:
    """Poll every guest until it answers SSH (host key verified); seconds until each answered."""
    with _quiet_paramiko():
        return _wait(state, timeout_s, progress, alive)


def _wait(state, timeout_s, progress, alive) -> dict[str, float]:
    started = last_word = time.monotonic()
    waiting = {g.name: g for g in state.guests}
    answered: dict[str, float] = {}
    progress(f"waiting for {', '.join(waiting)} to boot and answer SSH (about a minute)")
    while waiting:
        if time.monotonic() - last_word >= 20:
            last_word = time.monotonic()
            progress(f"still booting: {', '.join(waiting)} ({last_word - started:.0f} s)")
        for name, guest in list(waiting.items()):
            if not alive(guest):
                raise FxError(f"{name}: QEMU exited while booting",
                              f"see {guest_dir(state.name, name) / 'console.log'}")
            if _answers(state, guest):
                answered[name] = time.monotonic() - started
                progress(f"{name}: answering SSH on 127.0.0.1:{guest.ssh_port} "
                         f"({answered[name]:.0f} s)")
                del waiting[name]
        if waiting and time.monotonic() - started > timeout_s:
            raise FxError(f"{', '.join(waiting)} did not answer SSH within {timeout_s:.0f} s",
                          f"see the console logs under {state.folder / 'guests'}")
        if waiting:
            time.sleep(2)
    return answered


def _answers(state: LabState, guest: GuestRecord) -> bool:
    """One probe; False while sshd is not up yet. A host key refusal is raised, never retried."""
    try:
        return probe_guest(state, guest, timeout=8) == guest.name
    except HostKeyRefused:
        raise
    except RemoteError:
        return False


@contextmanager
def _quiet_paramiko():
    """While a guest boots, its forwarded port resets connections: paramiko logs each as an error."""
    logger = logging.getLogger("paramiko")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
