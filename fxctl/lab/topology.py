"""The shape of a lab: which guests, their drives, and the private links between them (pure data).

Private links are point-to-point (QEMU `-netdev stream` over 127.0.0.1): every initiator gets `paths`
links (default 1) to every target, each link its own /24 (10.99.L.0/24: target .1, initiator .2), MTU
9000. The default lab (1 target, 1 initiator) is one link: target eth1 10.99.0.1, initiator eth1
10.99.0.2; with `--paths 2` a second one, eth2 10.99.1.1 / 10.99.1.2 (two ports for NVMe multipath). Management is
eth0 (QEMU user networking, restrict=on, SSH forwarded from 127.0.0.1 only).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from fxctl.errors import BadInput
from fxctl.units import size_bytes

PRIVATE_PREFIX = "10.99"
MAX_LINKS = 16
MAX_PATHS = 4
MAX_DRIVES = 16
# The guests' root is the initramfs in RAM (tmpfs, half of it): 1280 MiB left 78 MB free on a 509 MB root,
# too little for `fxctl serve` to unpack fxctl's dependency wheels there (about 80 MB staged and unpacked)
DEFAULT_MEMORY_MIB = 1536


@dataclass(frozen=True)
class LabSpec:
    name: str
    targets: int = 1
    initiators: int = 1
    drives: int = 4
    drive_size: int = 256 << 20
    memory_mib: int = DEFAULT_MEMORY_MIB
    paths: int = 1          # private links between each target and each initiator

    def check(self) -> LabSpec:
        if not 1 <= self.targets or not 1 <= self.initiators:
            raise BadInput("a lab needs at least one target and one initiator")
        if not 1 <= self.paths <= MAX_PATHS:
            raise BadInput(f"--paths must be 1..{MAX_PATHS}, not {self.paths}")
        if self.targets * self.initiators * self.paths > MAX_LINKS:
            raise BadInput(f"{self.targets} targets x {self.initiators} initiators x {self.paths} paths need "
                           f"more than {MAX_LINKS} private links", "use fewer guests or paths")
        if not 1 <= self.drives <= MAX_DRIVES:
            raise BadInput(f"--drives must be 1..{MAX_DRIVES}, not {self.drives}")
        if self.drive_size < 16 << 20:
            raise BadInput("--drive-size must be at least 16MiB")
        return self


@dataclass(frozen=True)
class PrivateLink:
    index: int
    target: str
    initiator: str

    @property
    def subnet(self) -> str:
        return f"{PRIVATE_PREFIX}.{self.index}.0/24"

    def address(self, guest: str) -> str:
        """The guest's address on this link, with prefix length."""
        host = 1 if guest == self.target else 2
        return f"{PRIVATE_PREFIX}.{self.index}.{host}/24"

    def peer(self, guest: str) -> str:
        return self.initiator if guest == self.target else self.target


@dataclass(frozen=True)
class Nic:
    netdev: str          # name inside the guest: eth0 (management), eth1.. (private links)
    mac: str
    link: PrivateLink | None = None


@dataclass(frozen=True)
class Drive:
    serial: str
    file_name: str

    @property
    def by_id(self) -> str:
        return f"/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_{self.serial}"


@dataclass(frozen=True)
class GuestPlan:
    name: str
    role: str            # target | initiator
    number: int          # 1-based over the whole lab
    nics: tuple[Nic, ...]
    drives: tuple[Drive, ...] = field(default=())

    @property
    def private_nics(self) -> tuple[Nic, ...]:
        return tuple(nic for nic in self.nics if nic.link is not None)


@dataclass(frozen=True)
class LabPlan:
    spec: LabSpec
    guests: tuple[GuestPlan, ...]
    links: tuple[PrivateLink, ...]

    def guest(self, name: str) -> GuestPlan:
        for guest in self.guests:
            if guest.name == name:
                return guest
        raise KeyError(name)


def parse_size(text: str) -> int:
    """'256M', '1G', '512MiB' -> bytes (powers of 1024): fxctl.units.size_bytes."""
    return size_bytes(text)


def lab_tag(name: str) -> str:
    """Two hex characters from the lab name: keeps MACs and serials of different labs apart."""
    return hashlib.sha256(name.encode()).hexdigest()[:2]


def plan_lab(spec: LabSpec) -> LabPlan:
    spec.check()
    targets = [f"target{i}" for i in range(1, spec.targets + 1)]
    initiators = [f"initiator{i}" for i in range(1, spec.initiators + 1)]
    links = tuple(PrivateLink(index, t, i) for index, (t, i) in
                  enumerate((t, i) for t in targets for i in initiators for _ in range(spec.paths)))
    tag = lab_tag(spec.name)
    guests = []
    for number, name in enumerate(targets + initiators, start=1):
        role = "target" if name in targets else "initiator"
        own = [link for link in links if name in (link.target, link.initiator)]
        nics = [Nic("eth0", _mac(tag, number, 0))]
        nics += [Nic(f"eth{k}", _mac(tag, number, k), link) for k, link in enumerate(own, start=1)]
        drives = _drives(tag, number, spec.drives) if role == "target" else ()
        guests.append(GuestPlan(name, role, number, tuple(nics), drives))
    return LabPlan(spec, tuple(guests), links)


def _mac(tag: str, guest_number: int, nic: int) -> str:
    return f"52:54:00:{tag}:{guest_number:02x}:{nic:02x}"


def _drives(tag: str, guest_number: int, count: int) -> tuple[Drive, ...]:
    return tuple(Drive(serial=f"FXLAB{tag.upper()}G{guest_number}D{d}", file_name=f"nvme{d}.img")
                 for d in range(1, count + 1))
