"""Where `fxctl serve` acts: this machine or inventory hosts, chosen from the options and the inventory,
and the defaults that follow from that choice (state folder, where L2 lives)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fxctl.errors import BadInput
from fxctl.inventory.model import Host
from fxctl.remote.journal import RunJournal
from fxctl.remote.machine import Machine
from fxctl.remote.pool import HostOutcome, run_here, run_on_hosts


@dataclass
class Where:
    """Local (this machine) or these inventory hosts; `router_host`: the inventory's serve.router.host;
    `state_dir`: the inventory's serve.state_dir (where configs, logs and state go on the hosts); `journal`:
    the run journal every command on these places goes to (the Wheres made from this one share it)."""

    hosts: list[Host] = field(default_factory=list)
    router_host: Host | None = None
    state_dir: str | None = None
    journal: RunJournal | None = None

    @property
    def local(self) -> bool:
        return not self.hosts

    def each(self, work: Callable[[Machine], object]) -> dict[str, HostOutcome]:
        """work(machine) on each place, every host's outcome kept alike, here or over SSH; each command goes
        to the journal."""
        if self.local:
            return run_here(work, journal=self.journal)
        return run_on_hosts(self.hosts, work, journal=self.journal)

    def router_place(self) -> Where:
        """Where the deployment's router runs: serve.router.host, else the first serving host (or here)."""
        if self.local:
            return self
        return Where([self.router_host or self.hosts[0]], state_dir=self.state_dir, journal=self.journal)

    def with_router(self) -> Where:
        """The serving hosts plus the router's host when it is another one (status, stop and logs look there)."""
        extra = [self.router_host] if self.router_host and self.router_host not in self.hosts else []
        return Where(self.hosts + extra, self.router_host, self.state_dir, self.journal)

    def address_of(self, name: str) -> str:
        """How the router reaches a serving host: its inventory address (127.0.0.1 here)."""
        return next((h.address for h in self.hosts if h.name == name), "127.0.0.1")


def select(inventory, hosts: tuple[str, ...] | list[str], local: bool) -> Where:
    """--local, or no inventory: this machine; else --host names (every one must exist) or serve.hosts."""
    if local or inventory is None:
        return Where()
    names = list(hosts) or (list(inventory.serve.hosts) if inventory.serve else [])
    if not names:
        raise BadInput("no serving hosts", "pass --host NAME, set serve.hosts in the inventory, or use --local")
    unknown = [n for n in names if n not in inventory.hosts]
    if unknown:
        raise BadInput(f"unknown host(s): {', '.join(unknown)}", f"hosts: {', '.join(inventory.hosts)}")
    router = inventory.serve.router.host if inventory.serve and inventory.serve.router else None
    if router and router not in inventory.hosts:
        raise BadInput(f"serve.router.host {router!r} is not an inventory host", f"hosts: {', '.join(inventory.hosts)}")
    return Where([inventory.hosts[n] for n in names], inventory.hosts[router] if router else None,
                 inventory.serve.state_dir if inventory.serve else None)


def state_dir_for(where: Where) -> str:
    from fxctl.paths import serve_state_dir
    from fxctl.serve.settings import REMOTE_STATE

    return str(serve_state_dir()) if where.local else where.state_dir or REMOTE_STATE


def default_l2_dir(inventory, where: Where) -> str | None:
    """L2 lives on the array's mount: <mount>/fxtier when the hosts initiate exactly one array; locally, under
    the state folder."""
    if where.local:
        return f"{state_dir_for(where)}/l2"
    mounts = {a.mount for a in inventory.arrays if set(a.initiators) & {h.name for h in where.hosts}}
    return f"{sorted(mounts)[0]}/fxtier" if len(mounts) == 1 else None
