"""Real OpenSSH servers on 127.0.0.1 for tests: generated host and client keys, free ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SUDO_USER = "fxctl-test"  # created by .ci/run (NOPASSWD sudo); see docs/tests.md


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "fxctl-test", "-f", str(path)],
                   check=True)
    return path


@dataclass
class SshServer:
    name: str
    port: int
    folder: Path
    host_key: Path
    process: subprocess.Popen
    address: str = "127.0.0.1"   # any of 127.0.0.0/8: "hosts" with addresses of their own (Ray's node IPs)

    @property
    def host_pub(self) -> str:
        return " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {self.host_pub}\n"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start_sshd(folder: Path, name: str, client_pub: Path, host_key: Path | None = None,
               address: str = "127.0.0.1") -> SshServer:
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)
    if host_key is None:
        host_key = keygen(folder / "ssh_host_ed25519_key")
    auth = folder / "authorized_keys"
    shutil.copy(client_pub, auth)
    os.chmod(auth, 0o644)
    os.chmod(folder, 0o755)
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress {address}\nHostKey {host_key}\nPidFile {folder}/sshd.pid\n"
        f"AuthorizedKeysFile {auth}\nStrictModes no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nMaxStartups 100:30:200\n"
        "MaxSessions 50\nSubsystem sftp internal-sftp\nPrintLastLog no\nPrintMotd no\nUseDNS no\n")
    process = subprocess.Popen([SSHD, "-D", "-e", "-r", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=open(folder / "sshd.log", "w"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {(folder / 'sshd.log').read_text()}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    return SshServer(name, port, folder, host_key, process, address)


def sudo_user_ready() -> bool:
    """The unprivileged user with NOPASSWD sudo that .ci/run creates."""
    try:
        import pwd
        pwd.getpwnam(SUDO_USER)
    except KeyError:
        return False
    return shutil.which("sudo") is not None
