"""Library side of `fxctl inventory`: validation summary, host-key trust, reachability."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from fxctl.errors import HostKeyRefused, RemoteError
from fxctl.inventory.model import Host
from fxctl.remote.command import sh
from fxctl.remote.hostkeys import add_known_host, default_known_hosts, fetch_host_key, fingerprint, known_hosts_name
from fxctl.remote.pool import HostOutcome, run_on_hosts


@dataclass
class OfferedKey:
    key: paramiko.PKey
    fingerprint: str
    key_type: str
    known_hosts: Path
    already_known: bool


def offered_key(host: Host) -> OfferedKey:
    try:
        key = fetch_host_key(host.address, host.port, timeout=host.connect_timeout)
    except (OSError, paramiko.SSHException) as exc:
        raise RemoteError(f"{host.name}: cannot read the host key of {host.address}:{host.port}: {exc}") from None
    path = Path(os.path.expanduser(host.known_hosts)) if host.known_hosts else default_known_hosts()
    known = paramiko.HostKeys(str(path)) if path.exists() else paramiko.HostKeys()
    entry = known.lookup(known_hosts_name(host.address, host.port)) or {}
    stored = entry.get(key.get_name())
    if stored is not None and stored != key:
        raise HostKeyRefused(f"{host.name}: host key CHANGED: {path} holds another {key.get_name()} key",
                             "remove the old line only if you know why the key changed")
    return OfferedKey(key, fingerprint(key), key.get_name(), path, stored is not None)


def trust(host: Host, offer: OfferedKey) -> None:
    add_known_host(offer.known_hosts, host.address, host.port, offer.key)


def ping(hosts: list[Host]) -> list[HostOutcome]:
    outcomes = run_on_hosts(hosts, lambda session: session.run(sh("true"), check=True).exit_code)
    return [outcomes[h.name] for h in hosts]
