"""N local sshd endpoints, their inventory, and the check that a --check run changed nothing here."""

from __future__ import annotations

import hashlib
import json
import resource
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from tests.support.sshd import SUDO_USER, SshServer, keygen, start_sshd, sudo_user_ready

BY_ID = Path("/dev/disk/by-id")
DRIVE_PREFIX = "fxctl-bench-drive-"
DRIVES_PER_ARRAY = 2


@dataclass
class Endpoint:
    """How every tool reaches one host: the same address, port, user, key and known_hosts file."""
    name: str
    port: int
    user: str
    key: str
    known_hosts: str
    address: str = "127.0.0.1"


def start_fleet(folder: Path, count: int) -> tuple[list[SshServer], list[Endpoint]]:
    """`count` lean sshd servers (one host key each, pinned in one known_hosts file)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = count * 16 + 256      # per host: listener, a client socket per tool, log files; sshd children
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    client = keygen(folder / "client")
    servers: list[SshServer] = []
    try:
        for i in range(count):
            servers.append(start_sshd(folder / f"h{i}", f"h{i}", client.with_suffix(".pub")))
    except BaseException:
        stop_fleet(servers)
        raise
    known = folder / "known_hosts"
    known.write_text("".join(s.known_hosts_line() for s in servers))
    # the unprivileged test user with NOPASSWD sudo when it exists (as the fleet would run): root's ~/.bashrc
    # here runs `pyenv init` on every SSH command, which would measure this machine's dotfiles
    user = SUDO_USER if sudo_user_ready() else "root"
    return servers, [Endpoint(s.name, s.port, user, str(client), str(known)) for s in servers]


def stop_fleet(servers: list[SshServer]) -> None:
    for server in servers:
        server.stop()


def write_endpoints(path: Path, endpoints: list[Endpoint]) -> None:
    path.write_text(json.dumps([asdict(e) for e in endpoints], indent=1))


def inventory(endpoints: list[Endpoint]) -> dict:
    """Pairs of hosts: h(2k) exports two drives to h(2k+1) over TCP (one initiator per array); every host
    has one interface in the network section (lo: no RDMA port here, which net verify reports)."""
    first = endpoints[0]
    doc: dict = {"version": 1,
                 "defaults": {"user": first.user, "key": first.key, "known_hosts": first.known_hosts,
                              "sudo": first.user != "root", "connect_timeout": 60},
                 "hosts": {e.name: {"address": e.address, "port": e.port} for e in endpoints}, "arrays": []}
    for k in range(len(endpoints) // 2):
        target, initiator = endpoints[2 * k].name, endpoints[2 * k + 1].name
        doc["hosts"][target]["roles"] = ["target"]
        doc["hosts"][initiator]["roles"] = ["initiator"]
        doc["arrays"].append({
            "name": f"bench{k}", "target": target, "nqn": f"nqn.2026-12.io.fxctl:bench{k}", "transport": "tcp",
            "listen": {"address": "127.0.0.1", "port": 4420},
            "drives": [{"by_id": str(BY_ID / f"{DRIVE_PREFIX}{k}-{j}")} for j in range(DRIVES_PER_ARRAY)],
            "initiators": [initiator], "filesystem": {"mount": f"/mnt/fxctl-bench{k}"}})
    doc["network"] = {"mtu": 1500, "interfaces": {e.name: [{"netdev": "lo"}] for e in endpoints}}
    return doc


def write_inventory(path: Path, endpoints: list[Endpoint]) -> Path:
    path.write_text(yaml.safe_dump(inventory(endpoints), sort_keys=False))
    return path


class DriveLinks:
    """/dev/disk/by-id names for the inventory's drives, pointing at /dev/null: the targets' plans find
    blank drives and go on to plan every round (no NVMe here). Removed afterwards; nothing else touched."""

    def __init__(self, arrays: int):
        self.links = [BY_ID / f"{DRIVE_PREFIX}{k}-{j}" for k in range(arrays) for j in range(DRIVES_PER_ARRAY)]
        self.made_dir = False

    def __enter__(self) -> DriveLinks:
        if not BY_ID.exists():
            BY_ID.mkdir(parents=True)
            self.made_dir = True
        for link in self.links:
            if not link.is_symlink():
                link.symlink_to("/dev/null")
        return self

    def __exit__(self, *exc) -> None:
        for link in self.links:
            link.unlink(missing_ok=True)
        if self.made_dir:
            BY_ID.rmdir()


# what provision would change on a host (every host here is this machine): compared before and after
STATE_COMMANDS = (
    "cat /etc/nvme/hostnqn /etc/nvme/hostid 2>&1",
    "find /sys/kernel/config/nvmet 2>&1 | sort",
    "grep -E '^(nvme|nvmet|md_mod|raid0|xfs)' /proc/modules | cut -d' ' -f1 | sort",
    "cat /proc/mdstat 2>&1",
    "grep -E 'fxctl-bench|/dev/md' /proc/mounts",   # the inventory's mounts (other work here mounts elsewhere)
    "cat /etc/fstab /etc/mdadm/mdadm.conf /etc/mdadm.conf 2>&1",
    "ls /etc/systemd/system /etc/systemd/system/*.wants 2>&1 | grep -E 'fxctl|nvmf|nvmet'",
    "ls -la /etc/fxctl 2>&1",
)


def host_state() -> dict[str, str]:
    """Digest of each piece of state a provision touches, read locally (this machine is every host)."""
    state = {}
    for command in STATE_COMMANDS:
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
        state[command] = hashlib.sha256(out.encode()).hexdigest()[:16]
    return state
