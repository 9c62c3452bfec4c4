"""Each guest's identity, made on the host: SSH host key, client key, hostnqn/hostid, addresses.

Keys live in the lab's state folder and survive `down`/`up`, so an inventory's pinned host keys stay
valid for the lab's life. The guest receives them at boot as a tar archive through fw_cfg.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import uuid
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab.guest_files import GUEST_ENV_PATH
from fxctl.lab.state import GuestRecord

HOST_KEY = "ssh_host_ed25519_key"
CLIENT_KEY = "id_ed25519"


def ensure_keypair(path: Path, comment: str) -> Path:
    """An ed25519 key pair at path (+ .pub), made once with ssh-keygen."""
    if path.is_file() and path.with_suffix(".pub").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    result = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise FxError(f"ssh-keygen failed for {path}: {result.stderr.strip()}")
    path.chmod(0o600)
    return path


def public_key_line(private_key: Path) -> str:
    """'ssh-ed25519 AAAA...' (type and key, without the comment)."""
    parts = Path(str(private_key) + ".pub").read_text().split()
    return f"{parts[0]} {parts[1]}"


def ensure_guest_uuid(folder: Path) -> str:
    path = folder / "uuid"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(str(uuid.uuid4()) + "\n")
    return path.read_text().strip()


def hostnqn_for(guest_uuid: str) -> str:
    return f"nqn.2014-08.org.nvmexpress:uuid:{guest_uuid}"


def guest_env(guest: GuestRecord) -> str:
    links = " ".join(f"{link.mac}={link.address}" for link in guest.links)
    return (f"LAB_HOSTNAME={guest.name}\nLAB_ROLE={guest.role}\nLAB_MGMT_MAC={guest.mgmt_mac}\n"
            f"LAB_LINKS='{links}'\n")


def seed_archive(guest: GuestRecord, host_key: Path, client_public_key: str) -> bytes:
    """The tar the guest unpacks over / at boot (see guest_files.SEED_SCRIPT)."""
    members = [
        ("etc/ssh/" + HOST_KEY, host_key.read_bytes(), 0o600),
        ("etc/ssh/" + HOST_KEY + ".pub", Path(str(host_key) + ".pub").read_bytes(), 0o644),
        ("root/.ssh/authorized_keys", (client_public_key + "\n").encode(), 0o600),
        ("etc/nvme/hostnqn", (guest.hostnqn + "\n").encode(), 0o644),
        ("etc/nvme/hostid", (guest.uuid + "\n").encode(), 0o644),
        ("etc/hostname", (guest.name + "\n").encode(), 0o644),
        (GUEST_ENV_PATH, guest_env(guest).encode(), 0o644),
    ]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for folder in ("etc", "etc/ssh", "etc/nvme", "etc/fxctl-lab", "root", "root/.ssh"):
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            info.mode = 0o700 if folder.startswith("root") else 0o755
            archive.addfile(info)
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
