"""Bringing a lab up and down: plan -> keys -> ports -> drives -> seeds -> QEMU -> SSH answers."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from fxctl.errors import FxError
from fxctl.lab import hosttools
from fxctl.lab.access import wait_until_answering, write_known_hosts
from fxctl.lab.image import LabImage, ensure_image
from fxctl.lab.paths import lab_dir, state_root
from fxctl.lab.ports import allocate_ports, port_is_free, port_lock
from fxctl.lab.qemu import is_guest_process, qemu_argv, start_guest, stop_guest
from fxctl.lab.seed import (
    CLIENT_KEY,
    HOST_KEY,
    ensure_guest_uuid,
    ensure_keypair,
    hostnqn_for,
    public_key_line,
    seed_archive,
)
from fxctl.lab.state import DriveRecord, GuestRecord, LabState, LinkRecord, guest_dir, ports_of_other_labs
from fxctl.lab.topology import LabPlan, LabSpec, plan_lab

Progress = Callable[[str], None]
BOOT_TIMEOUT_S = 300


@dataclass
class UpResult:
    state: LabState
    already_running: bool
    seconds: float
    boot_seconds: dict


def running_guests(state: LabState) -> list[GuestRecord]:
    return [g for g in state.guests if is_guest_process(g.pid, state.name, g.name)]


def is_running(state: LabState | None) -> bool:
    return bool(state and state.guests) and len(running_guests(state)) == len(state.guests)


def up(spec: LabSpec, *, install_deps: bool = False, progress: Progress) -> UpResult:
    """Start the lab `spec.name` and wait until every guest answers SSH; harmless when it runs."""
    started = time.monotonic()
    plan = plan_lab(spec)
    existing = LabState.load(spec.name)
    if is_running(existing):
        progress(f"lab {spec.name} is already running{_shape_note(existing, plan)}")
        return UpResult(existing, True, 0.0, {})
    if existing is not None and running_guests(existing):
        progress(f"lab {spec.name} is partly running: stopping what is left first")
        down(spec.name, progress=progress)
    hosttools.require(hosttools.RUN_TOOLS, install=install_deps, progress=progress)
    image = ensure_image(install_deps=install_deps, progress=progress)
    try:
        state = _start(plan, image, progress)
        boot = wait_until_answering(state, timeout_s=BOOT_TIMEOUT_S, progress=progress,
                                    alive=lambda g: is_guest_process(g.pid, state.name, g.name))
    except BaseException:
        progress(f"lab {spec.name} did not come up: stopping it (console logs stay in {lab_dir(spec.name)})")
        down(spec.name, progress=progress)
        raise
    return UpResult(state, False, time.monotonic() - started, boot)


def _shape_note(state: LabState, plan: LabPlan) -> str:
    """Nothing when the running lab has the asked shape; otherwise what it has and how to change it."""
    running = [g.name for g in state.guests]
    if running == [g.name for g in plan.guests]:
        return ""
    return (f" with guests {', '.join(running)} (left as it is: run 'fxctl lab down --name {state.name}' "
            "first to change its shape)")


def _start(plan: LabPlan, image: LabImage, progress: Progress) -> LabState:
    spec = plan.spec
    folder = lab_dir(spec.name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    client = ensure_keypair(folder / CLIENT_KEY, f"fxctl-lab-{spec.name}")
    with port_lock(state_root()):
        state = _records(plan, image)
        _make_drives(state)
        _write_seeds(state, public_key_line(client))
        write_known_hosts(state)
        state.save()
        for guest in sorted(state.guests, key=lambda g: g.role != "target"):  # link servers first
            gdir = guest_dir(state.name, guest.name)
            argv = qemu_argv(state.name, guest, vmlinux=state.vmlinux, initramfs=state.initramfs,
                             memory_mib=state.memory_mib, folder=gdir)
            (gdir / "console.log").unlink(missing_ok=True)
            progress(f"{guest.name}: starting QEMU ({guest.role}, SSH on 127.0.0.1:{guest.ssh_port})")
            try:
                guest.pid = start_guest(argv, gdir)
            finally:
                state.save()
    return state


def _records(plan: LabPlan, image: LabImage) -> LabState:
    """Guest records with fresh ports: one SSH port per guest, one stream port per private link."""
    spec = plan.spec
    ports = allocate_ports(len(plan.guests) + len(plan.links), ports_of_other_labs(spec.name))
    link_ports = {link.index: ports[len(plan.guests) + i] for i, link in enumerate(plan.links)}
    guests = []
    for guest, ssh_port in zip(plan.guests, ports):
        gdir = guest_dir(spec.name, guest.name)
        guest_uuid = ensure_guest_uuid(gdir)
        links = [LinkRecord(index=nic.link.index, peer=nic.link.peer(guest.name), netdev=nic.netdev,
                            mac=nic.mac, address=nic.link.address(guest.name), port=link_ports[nic.link.index],
                            server=guest.role == "target") for nic in guest.private_nics]
        drives = [DriveRecord(serial=d.serial, path=str(gdir / d.file_name), by_id=d.by_id) for d in guest.drives]
        guests.append(GuestRecord(name=guest.name, role=guest.role, number=guest.number, uuid=guest_uuid,
                                  hostnqn=hostnqn_for(guest_uuid), ssh_port=ssh_port, mgmt_mac=guest.nics[0].mac,
                                  links=links, drives=drives))
    return LabState(name=spec.name, image_key=image.key, vmlinux=str(image.vmlinux),
                    initramfs=str(image.initramfs), memory_mib=spec.memory_mib, drive_size=spec.drive_size,
                    guests=guests)


def _make_drives(state: LabState) -> None:
    """Fresh sparse drive files at every up: guests are stateless, their drives start empty too."""
    for guest in state.guests:
        for drive in guest.drives:
            with open(drive.path, "wb") as handle:
                handle.truncate(state.drive_size)


def _write_seeds(state: LabState, client_public_key: str) -> None:
    for guest in state.guests:
        gdir = guest_dir(state.name, guest.name)
        host_key = ensure_keypair(gdir / HOST_KEY, f"root@{guest.name}.{state.name}")
        seed = gdir / "seed.tar"
        seed.write_bytes(seed_archive(guest, host_key, client_public_key))
        seed.chmod(0o600)


def down(name: str, *, progress: Progress) -> list[str]:
    """Stop exactly this lab's QEMU processes (pid checked against its command line); keep its keys."""
    state = LabState.load(name)
    if state is None:
        progress(f"lab {name}: nothing recorded")
        return []
    stopped = []
    for guest in state.guests:
        if stop_guest(guest.pid or 0, state.name, guest.name):
            stopped.append(guest.name)
            progress(f"{guest.name}: stopped (pid {guest.pid})")
        guest.pid = None
        gdir = guest_dir(state.name, guest.name)
        (gdir / "qemu.pid").unlink(missing_ok=True)
        for drive in guest.drives:
            if os.path.exists(drive.path):
                os.unlink(drive.path)
    state.save()
    busy = sorted(p for p in state.ports() if not port_is_free(p))
    if busy:
        raise FxError(f"lab {name}: ports still in use after stopping: {busy}",
                      "another program holds them; the lab will pick new ports at the next up")
    return stopped


def destroy(name: str, *, progress: Progress) -> None:
    """down, then remove the lab's state folder (keys included: the next up makes new host keys)."""
    down(name, progress=progress)
    shutil.rmtree(lab_dir(name), ignore_errors=True)
    progress(f"lab {name}: state removed")
