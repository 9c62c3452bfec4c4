"""`fxctl net apply`: resolve each host's interfaces, converge the recipe, and report unsupported items.

"unsupported" is a step status of its own (not ok, not changed): the NIC or the host's tools lack the
capability (virtio-net has no DCB). Under `strict` an unsupported step fails its host.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fxctl.engine.apply import HostReport, Status, StepReport, converge, exit_code_for
from fxctl.engine.fact import gather_facts
from fxctl.errors import ExitCode
from fxctl.facts.net import NicDriver, RdmaLinks
from fxctl.inventory.model import Host, Inventory
from fxctl.net.desired import Knobs, Nic, check_network, interfaces_of, qos_driver, resolve_interfaces
from fxctl.net.recipe import NetRecipe
from fxctl.ops.net import is_unsupported
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts


class NetStatus(str, enum.Enum):
    UNSUPPORTED = "unsupported"


@dataclass
class NetResult:
    check: bool
    strict: bool
    reports: list[HostReport] = field(default_factory=list)

    def unsupported(self) -> list[tuple[str, str, str]]:
        return [(r.host, s.step, s.reason) for r in self.reports for s in r.steps
                if s.status == NetStatus.UNSUPPORTED]

    def exit_code(self) -> int:
        code = exit_code_for(self.reports, self.check)
        if code == ExitCode.OK and self.strict and self.unsupported():
            return ExitCode.HOST_FAILED
        return code


def network_hosts(inventory: Inventory, names: list[str] | None) -> list[Host]:
    network = check_network(inventory)
    in_network = list(dict.fromkeys(spec.host for spec in network.interfaces))
    chosen = {h.name for h in inventory.select(names)} if names else set(in_network)
    return [inventory.hosts[name] for name in in_network if name in chosen]


def resolve_nics(inventory: Inventory, hosts: list[Host], journal: RunJournal | None
                 ) -> tuple[dict[str, list[Nic]], list[HostReport]]:
    """Each host's interfaces with netdev, RDMA device and QoS driver filled in (from the host)."""
    network = inventory.network
    assert network is not None

    def work(session) -> list[Nic]:
        specs = interfaces_of(network, session.host.name)
        links = gather_facts(session, {"rdma": RdmaLinks()})["rdma"]
        resolved = resolve_interfaces(specs, links)
        missing = [s.rdma_device for s in resolved if not s.netdev]
        if missing:
            from fxctl.errors import FxError
            raise FxError(f"{session.host.name}: RDMA device {', '.join(missing)} is bound to no netdev here",
                          "name the netdev in network.interfaces, or check `rdma link` on the host")
        drivers = gather_facts(session, {s.netdev: NicDriver(s.netdev) for s in resolved})
        return [Nic(s, qos_driver(network.driver, drivers[s.netdev]), drivers[s.netdev]) for s in resolved]

    outcomes = run_on_hosts(hosts, work, journal=journal)
    nics, failed = {}, []
    for host in hosts:
        outcome = outcomes[host.name]
        if outcome.ok:
            nics[host.name] = outcome.value
        else:
            failed.append(HostReport(host.name, Status.FAILED, error=outcome.error, hint=outcome.hint))
    return nics, failed


def mark_unsupported(report: HostReport, strict: bool) -> HostReport:
    for step in report.steps:
        if step.status == Status.OK and is_unsupported(step.reason):
            step.status = NetStatus.UNSUPPORTED  # type: ignore[assignment]
    items = [s for s in report.steps if s.status == NetStatus.UNSUPPORTED]
    if strict and items and report.status != Status.FAILED:
        report.status = Status.FAILED
        report.error = f"--strict: {len(items)} item(s) unsupported: " + ", ".join(s.step for s in items)
        report.hint = "this NIC (or its tools) cannot do them; drop --strict to accept that"
        report.steps.append(StepReport("--strict", Status.FAILED, report.error))
    return report


def apply(inventory: Inventory, *, hosts: list[str] | None = None, check: bool = False, strict: bool = False,
          journal: RunJournal | None = None, progress: Callable[[str, str], Any] | None = None) -> NetResult:
    network = check_network(inventory)
    chosen = network_hosts(inventory, hosts)
    nics, failed = resolve_nics(inventory, chosen, journal)
    recipe = NetRecipe(Knobs.of(network), nics)
    ready = [h for h in chosen if h.name in nics]
    reports = {r.host: r for r in converge(ready, recipe, check=check, journal=journal, progress=progress)}
    reports.update({r.host: r for r in failed})
    result = NetResult(check, strict)
    for host in chosen:
        report = reports[host.name]
        report.facts = {}  # facts stay in the run journal; the report carries the steps
        result.reports.append(mark_unsupported(report, strict))
    return result
