"""Several "hosts" on this machine that fxctl can deploy one deployment to: each an sshd in its own network
namespace (its own loopback and an address on a bridge, so every host can use the same ports) and its own
mount namespace with a private /var/lib/fxctl (fxctl's state folder on hosts, and here its L2 folder too).
The rest of the filesystem (the serving env, the model) is shared, as an NFS home would be.

Needs root and iproute2 (`ip netns`, a bridge, veth pairs). Everything started inside a namespace is killed
when the hosts are taken down.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.sshd import SSHD, keygen

BRIDGE = "fxbr17"
SUBNET = "10.213.17"
STATE = "/var/lib/fxctl"


@dataclass
class NsHost:
    name: str
    netns: str
    address: str
    folder: Path
    host_key: Path
    process: subprocess.Popen


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def available() -> str | None:
    """Why namespaced hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("ip") or not Path(SSHD).exists():
        return "needs iproute2 and sshd"
    return None


def start_hosts(folder: Path, count: int, client_pub: Path) -> list[NsHost]:
    for i in range(count):   # what a killed earlier run left (its namespaces' processes died with it or are killed)
        if subprocess.run(["ip", "netns", "pids", f"fxctl-ns{i}"], capture_output=True).returncode == 0:
            kill_all(f"fxctl-ns{i}")
            subprocess.run(["ip", "netns", "del", f"fxctl-ns{i}"], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    Path(STATE).mkdir(parents=True, exist_ok=True)
    return [start_host(folder / f"ns{i}", f"ns{i}", f"{SUBNET}.{11 + i}", client_pub) for i in range(count)]


def start_host(folder: Path, name: str, address: str, client_pub: Path) -> NsHost:
    netns = f"fxctl-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    (folder / "state").mkdir(exist_ok=True)
    ip("netns", "add", netns)
    ip("link", "add", f"{netns}-h", "type", "veth", "peer", "name", f"{netns}-n")
    ip("link", "set", f"{netns}-h", "master", BRIDGE, "up")
    ip("link", "set", f"{netns}-n", "netns", netns)
    ip("-n", netns, "addr", "add", f"{address}/24", "dev", f"{netns}-n")
    ip("-n", netns, "link", "set", f"{netns}-n", "up")
    ip("-n", netns, "link", "set", "lo", "up")
    host_key = keygen(folder / "ssh_host_ed25519_key")
    auth = folder / "authorized_keys"
    shutil.copy(client_pub, auth)
    os.chmod(auth, 0o644)
    config = folder / "sshd_config"
    config.write_text(
        f"Port 22\nListenAddress {address}\nHostKey {host_key}\nPidFile {folder}/sshd.pid\n"
        f"AuthorizedKeysFile {auth}\nStrictModes no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nMaxSessions 50\n"
        "Subsystem sftp internal-sftp\nPrintLastLog no\nPrintMotd no\nUseDNS no\n")
    # its own mount namespace: /var/lib/fxctl is this host's folder; every SSH session inherits both namespaces
    inner = f'mount --bind "$1" {STATE} && exec "$2" -D -e -r -f "$3"'
    process = subprocess.Popen(["ip", "netns", "exec", netns, "unshare", "--mount", "--propagation", "private",
                                "sh", "-c", inner, "sh", str(folder / "state"), SSHD, str(config)],
                               stdout=subprocess.DEVNULL, stderr=open(folder / "sshd.log", "w"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd in {netns} exited: {(folder / 'sshd.log').read_text()}")
        try:
            with socket.create_connection((address, 22), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    return NsHost(name, netns, address, folder, host_key, process)


def known_hosts(hosts: list[NsHost]) -> str:
    return "".join(f"{h.address} {' '.join(h.host_key.with_suffix('.pub').read_text().split()[:2])}\n"
                   for h in hosts)


def stop_hosts(hosts: list[NsHost]) -> None:
    """Kill whatever still runs in each namespace (sshd and anything a test left), then remove it all."""
    for host in hosts:
        kill_all(host.netns)
        host.process.wait(10)
        subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{host.netns}-h"], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def kill_all(netns: str) -> None:
    for pid in subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split():
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass
