"""Provisioning as rounds across hosts: identity -> target exports -> connections -> md -> XFS/mount.

Each round converges its hosts in parallel (facts, plan, apply, re-plan). A host that fails a round sits
out the rounds after it, and so do the initiators whose target failed; every host stays in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fxctl.engine.apply import HostReport, Status, converge
from fxctl.inventory.model import ArraySpec, Host, Inventory
from fxctl.ops.nvme_host import HOSTNQN_PATH
from fxctl.provision.initiator import (
    BootTimeoutsRecipe,
    ConnectRecipe,
    FilesystemRecipe,
    IdentityRecipe,
    RaidRecipe,
)
from fxctl.provision.exporter import ExporterRecipe
from fxctl.provision.target import TargetRecipe
from fxctl.provision.teardown import InitiatorTeardown, TargetTeardown
from fxctl.remote.command import sh
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts
from fxctl.errors import BadInput


@dataclass
class Round:
    name: str
    reports: list[HostReport] = field(default_factory=list)


@dataclass
class ProvisionResult:
    action: str                      # provision | destroy
    check: bool
    rounds: list[Round] = field(default_factory=list)
    verify: list[dict] = field(default_factory=list)

    def failed_hosts(self) -> set[str]:
        failed = {r.host for rnd in self.rounds for r in rnd.reports if r.status == Status.FAILED}
        return failed | {v["host"] for v in self.verify if not v["ok"]}

    def all_reports(self) -> list[HostReport]:
        return [r for rnd in self.rounds for r in rnd.reports]


def select_arrays(inventory: Inventory, names: list[str] | None) -> tuple[ArraySpec, ...]:
    if not inventory.arrays:
        raise BadInput(f"{inventory.path} has no arrays to provision", "add an arrays: section (see examples/)")
    if not names:
        return inventory.arrays
    unknown = [n for n in names if n not in {a.name for a in inventory.arrays}]
    if unknown:
        raise BadInput(f"no array named {', '.join(unknown)} in {inventory.path}",
                       "arrays: " + ", ".join(a.name for a in inventory.arrays))
    return tuple(a for a in inventory.arrays if a.name in names)


def skipped(host: Host, why: str) -> HostReport:
    return HostReport(host.name, Status.SKIPPED, error=why)


class Runner:
    """Runs rounds, carrying failures forward so dependent hosts sit out later rounds."""

    def __init__(self, inventory: Inventory, check: bool, journal: RunJournal | None,
                 progress: Callable[[str, str], Any] | None, result: ProvisionResult):
        self.inventory, self.check, self.journal, self.progress = inventory, check, journal, progress
        self.result = result
        self.failed: set[str] = set()

    def round(self, name: str, host_names: list[str], recipe, blocked_by: dict[str, list[str]] | None = None):
        rnd = Round(name)
        ready: list[Host] = []
        for host_name in dict.fromkeys(host_names):
            host = self.inventory.hosts[host_name]
            blockers = [b for b in (blocked_by or {}).get(host_name, []) + [host_name] if b in self.failed]
            if blockers:
                rnd.reports.append(skipped(host, f"not run: {', '.join(blockers)} failed in an earlier round"))
            else:
                ready.append(host)
        if self.progress:
            self.progress("round", name)
        rnd.reports += converge(ready, recipe, check=self.check, journal=self.journal, progress=self.progress)
        self.failed |= {r.host for r in rnd.reports if r.status in (Status.FAILED, Status.SKIPPED)}
        self.result.rounds.append(rnd)
        return rnd


def read_hostnqns(initiators: list[Host], journal: RunJournal | None) -> dict[str, str]:
    outcomes = run_on_hosts(initiators, lambda s: s.run(sh("cat", HOSTNQN_PATH), check=False).stdout.strip(),
                            journal=journal)
    return {name: o.value for name, o in outcomes.items() if o.ok and o.value}


def provision(inventory: Inventory, *, arrays: list[str] | None = None, check: bool = False,
              wipe: bool = False, journal: RunJournal | None = None,
              progress: Callable[[str, str], Any] | None = None) -> ProvisionResult:
    chosen = select_arrays(inventory, arrays)
    result = ProvisionResult("provision", check)
    runner = Runner(inventory, check, journal, progress, result)
    initiators = [i for a in chosen for i in a.initiators]
    targets = [a.target for a in chosen]
    target_of = {i: [a.target for a in chosen if i in a.initiators] for i in initiators}
    initiators_of = {t: [i for a in chosen if a.target == t for i in a.initiators] for t in targets}

    runner.round("identity", initiators, IdentityRecipe())
    hostnqns = read_hostnqns([inventory.hosts[i] for i in dict.fromkeys(initiators) if i not in runner.failed],
                             journal)
    for name in initiators:  # under --check a fresh host has no NQN yet
        hostnqns.setdefault(name, inventory.hosts[name].hostnqn or f"nqn.2014-08.org.nvmexpress:uuid:<{name}>")
    runner.round("target", targets, TargetRecipe(chosen, hostnqns, wipe), blocked_by=initiators_of)
    runner.round("connect", initiators, ConnectRecipe(chosen), blocked_by=target_of)
    runner.round("timeouts at boot", initiators, BootTimeoutsRecipe(chosen), blocked_by=target_of)
    runner.round("raid", initiators, RaidRecipe(chosen, wipe), blocked_by=target_of)
    runner.round("filesystem", initiators, FilesystemRecipe(chosen, wipe), blocked_by=target_of)
    runner.round("array exporter", initiators, ExporterRecipe(inventory.arrays, chosen, inventory.monitoring),
                 blocked_by=target_of)
    if not check:
        from fxctl.provision.verify import verify_arrays
        ok_initiators = [inventory.hosts[i] for i in dict.fromkeys(initiators) if i not in runner.failed]
        result.verify = verify_arrays(ok_initiators, chosen, journal)
    return result


def destroy(inventory: Inventory, *, arrays: list[str] | None = None, check: bool = False, wipe: bool = False,
            journal: RunJournal | None = None, progress: Callable[[str, str], Any] | None = None) -> ProvisionResult:
    chosen = select_arrays(inventory, arrays)
    result = ProvisionResult("destroy", check)
    runner = Runner(inventory, check, journal, progress, result)
    initiators = [i for a in chosen for i in a.initiators]
    initiators_of = {a.target: list(a.initiators) for a in chosen}
    runner.round("initiator teardown", initiators, InitiatorTeardown(chosen, wipe))
    runner.round("target teardown", [a.target for a in chosen],
                 TargetTeardown(inventory.arrays, tuple(a.name for a in chosen), wipe), blocked_by=initiators_of)
    # last: a host whose exporter cannot be updated blocks no teardown
    runner.round("array exporter", initiators,
                 ExporterRecipe(inventory.arrays, chosen, inventory.monitoring, removing=True))
    return result
