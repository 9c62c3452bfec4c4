"""Host key verification: known_hosts by default, or a key pinned in the inventory. Never auto-trust.

An unknown key is refused with its fingerprint and the command that trusts it; a changed key is refused
(paramiko raises BadHostKeyException against known_hosts; a pinned key that differs is refused here).
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import paramiko

from fxctl.errors import HostKeyRefused, RemoteError


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def pinned_matches(pinned: str, key: paramiko.PKey) -> bool:
    """True when `key` is the pinned key ('ssh-ed25519 AAAA...' line or 'SHA256:...' fingerprint)."""
    pinned = pinned.strip()
    if pinned.startswith("SHA256:"):
        return pinned.rstrip("=") == fingerprint(key)
    parts = pinned.split()
    return len(parts) >= 2 and parts[0] == key.get_name() and parts[1] == key.get_base64()


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class PinnedKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Accept the server's key only when it is the one pinned in the inventory."""

    def __init__(self, host_name: str, pinned: str):
        self.host_name = host_name
        self.pinned = pinned

    def missing_host_key(self, client, hostname, key):
        if not pinned_matches(self.pinned, key):
            raise HostKeyRefused(
                f"{self.host_name}: host key CHANGED or wrong: server offers {key.get_name()} "
                f"{fingerprint(key)}, inventory pins {self.pinned[:60]}",
                "if the host was really reinstalled, update hosts." + self.host_name
                + ".host_key in the inventory; otherwise treat this as an attack")


class UnknownKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse a host that is not in known_hosts, showing what trusting it would take."""

    def __init__(self, host_name: str, known_hosts: Path):
        self.host_name = host_name
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        raise HostKeyRefused(
            f"{self.host_name}: host key unknown ({hostname} offers {key.get_name()} {fingerprint(key)}; "
            f"not in {self.known_hosts})",
            f"check the fingerprint out of band, then run `fxctl inventory trust {self.host_name}` "
            "or pin it as host_key in the inventory")


def default_known_hosts() -> Path:
    return Path(os.path.expanduser("~/.ssh/known_hosts"))


def known_hosts_path(known_hosts: str | None) -> Path:
    """The known_hosts file a host is verified against: its own, else ~/.ssh/known_hosts."""
    return Path(os.path.expanduser(known_hosts)) if known_hosts else default_known_hosts()


def configure_client(client: paramiko.SSHClient, host_name: str, pinned: str | None,
                     known_hosts: str | None) -> None:
    """Set up `client` to verify the server: pinned key if given, else the known_hosts file."""
    if pinned:
        client.set_missing_host_key_policy(PinnedKeyPolicy(host_name, pinned))
        return
    path = known_hosts_path(known_hosts)
    if path.exists():
        try:
            client.load_host_keys(str(path))
        except (OSError, paramiko.SSHException) as exc:
            raise RemoteError(f"{host_name}: cannot read known_hosts {path}: {exc}") from None
    client.set_missing_host_key_policy(UnknownKeyPolicy(host_name, path))


def fetch_host_key(address: str, port: int, timeout: float = 10.0) -> paramiko.PKey:
    """The server's host key, read from the SSH handshake without authenticating."""
    import socket

    with socket.create_connection((address, port), timeout=timeout) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.start_client(timeout=timeout)
            return transport.get_remote_server_key()
        finally:
            transport.close()


def add_known_host(path: Path, address: str, port: int, key: paramiko.PKey) -> None:
    """Append the key to known_hosts (the explicit trust step), creating the file 0600 if needed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = f"{known_hosts_name(address, port)} {key_line(key)}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write(line)
