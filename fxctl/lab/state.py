"""What a lab records in its state folder (state.json): guests, ports, pids, image. Plain data."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab.paths import lab_dir, state_root

STATE_FILE = "state.json"


@dataclass
class LinkRecord:
    index: int
    peer: str
    netdev: str
    mac: str
    address: str        # with prefix length, e.g. 10.99.0.1/24
    port: int           # the loopback port of the QEMU stream link
    server: bool        # this guest's QEMU listens on the port


@dataclass
class DriveRecord:
    serial: str
    path: str
    by_id: str


@dataclass
class GuestRecord:
    name: str
    role: str
    number: int
    uuid: str
    hostnqn: str
    ssh_port: int
    mgmt_mac: str
    links: list[LinkRecord] = field(default_factory=list)
    drives: list[DriveRecord] = field(default_factory=list)
    pid: int | None = None

    @classmethod
    def from_dict(cls, data: dict) -> GuestRecord:
        data = dict(data)
        data["links"] = [LinkRecord(**link) for link in data.get("links", [])]
        data["drives"] = [DriveRecord(**drive) for drive in data.get("drives", [])]
        return cls(**data)


@dataclass
class LabState:
    name: str
    image_key: str
    vmlinux: str
    initramfs: str
    memory_mib: int
    drive_size: int
    guests: list[GuestRecord] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return lab_dir(self.name)

    def guest(self, name: str) -> GuestRecord | None:
        return next((g for g in self.guests if g.name == name), None)

    def ports(self) -> set[int]:
        ports = {g.ssh_port for g in self.guests}
        return ports | {link.port for g in self.guests for link in g.links}

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, self.folder / STATE_FILE)

    @classmethod
    def load(cls, name: str) -> LabState | None:
        path = lab_dir(name) / STATE_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        data["guests"] = [GuestRecord.from_dict(g) for g in data.get("guests", [])]
        return cls(**data)


def guest_dir(lab_name: str, guest: str) -> Path:
    return lab_dir(lab_name) / "guests" / guest


def ports_of_other_labs(name: str) -> set[int]:
    """Ports recorded by every other lab's state on this machine (running or not)."""
    taken: set[int] = set()
    root = state_root()
    if not root.is_dir():
        return taken
    for folder in root.iterdir():
        if folder.name != name and (folder / STATE_FILE).is_file():
            try:
                other = LabState.load(folder.name)
            except (ValueError, TypeError, KeyError, FxError):
                continue
            if other is not None:
                taken |= other.ports()
    return taken
