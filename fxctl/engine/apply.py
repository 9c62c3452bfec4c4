"""Apply and verify: parallel across hosts, in order on a host, first failure stops that host only.

A `Recipe` says, for one host, which facts to read and which steps follow from them. `converge` runs the
recipe on every host: gather facts, plan, (unless check) apply the plan, then gather facts again and
plan again: any step still pending after apply is a failure, "not converged". A host whose plan changed
nothing is not read again: the facts it was planned from are its state.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fxctl.engine.fact import Fact, gather_facts
from fxctl.engine.plan import Step
from fxctl.inventory.model import Host
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts
from fxctl.remote.session import HostSession, tail


class Status(str, enum.Enum):
    OK = "ok"
    CHANGED = "changed"      # changed, and now as desired (serve's pre-flight: fxctl installed into the env)
    PENDING = "pending"      # under --check: would change (serve start --check: what start would install)
    FAILED = "failed"
    SKIPPED = "skipped"
    WARN = "warn"            # a check that holds with a caveat (serve's pre-flight: untested version, no md)


class Recipe(Protocol):
    def facts(self, host: Host) -> dict[str, Fact]: ...

    def plan(self, host: Host, facts: dict[str, Any]) -> list[Step]: ...


@dataclass
class StepReport:
    step: str
    status: Status
    reason: str = ""
    commands: list[str] = field(default_factory=list)
    exit_code: int | None = None
    duration_s: float = 0.0
    output_tail: str = ""


@dataclass
class HostReport:
    host: str
    status: Status
    steps: list[StepReport] = field(default_factory=list)
    error: str | None = None
    hint: str | None = None
    duration_s: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    pending_after_apply: list[str] = field(default_factory=list)   # steps apply ran but did not converge

    @property
    def changed(self) -> int:
        return sum(1 for s in self.steps if s.status in (Status.CHANGED, Status.PENDING))


def apply_steps(session: HostSession, steps: list[Step], timeout: float,
                progress: Callable[[str, str], Any] | None = None) -> list[StepReport]:
    """Run each step's commands in order; stop at the first failure (later steps: skipped)."""
    reports: list[StepReport] = []
    failed = False
    for step in steps:
        if failed:
            reports.append(StepReport(step.name, Status.SKIPPED, "an earlier step failed"))
            continue
        if not step.changes:
            reports.append(StepReport(step.name, Status.OK, step.reason))
            continue
        if progress:
            progress(session.name, step.name)
        start = time.monotonic()
        report = StepReport(step.name, Status.CHANGED, commands=[c.masked() for c in step.commands])
        for command in step.commands:
            result = session.run(command, timeout=timeout)
            report.exit_code, report.output_tail = result.exit_code, result.tail(10)
            if not result.ok:
                report.status, failed = Status.FAILED, True
                report.reason = result.describe_failure()
                break
        report.duration_s = time.monotonic() - start
        reports.append(report)
    return reports


def converge_host(session: HostSession, recipe: Recipe, *, check: bool, timeout: float = 600,
                  progress: Callable[[str, str], Any] | None = None) -> HostReport:
    host = session.host
    facts = gather_facts(session, recipe.facts(host))
    steps = recipe.plan(host, facts)
    refusals = [s for s in steps if s.refusal]
    if refusals:
        reports = [StepReport(s.name, Status.FAILED if s.refusal else Status.SKIPPED, s.refusal or
                              "not run: the plan for this host was refused") for s in steps]
        return HostReport(host.name, Status.FAILED, reports, error="; ".join(s.refusal for s in refusals),
                          hint="nothing was changed on this host", facts=facts)
    if check:
        reports = [StepReport(s.name, Status.PENDING if s.changes else Status.OK, s.reason,
                              [c.masked() for c in s.commands]) for s in steps]
        status = Status.PENDING if any(s.changes for s in steps) else Status.OK
        return HostReport(host.name, status, reports, facts=facts)
    reports = apply_steps(session, steps, timeout, progress)
    if any(r.status == Status.FAILED for r in reports):
        failed = next(r for r in reports if r.status == Status.FAILED)
        return HostReport(host.name, Status.FAILED, reports, error=failed.reason)
    if not any(r.status == Status.CHANGED for r in reports):
        # nothing ran: the facts just read are the host's state, and they planned nothing (reading them
        # again cost a converged provision half its commands: 50 of 107 on the lab's initiator)
        return HostReport(host.name, Status.OK, reports)
    after = recipe.plan(host, gather_facts(session, recipe.facts(host)))
    still = [s for s in after if s.changes]
    if still:
        return HostReport(host.name, Status.FAILED, reports,
                          error="not converged: still pending after apply: " + ", ".join(s.name for s in still),
                          hint="a command succeeded without producing the state fxctl checks for; see -v",
                          pending_after_apply=[s.name for s in still])
    changed = any(r.status == Status.CHANGED for r in reports)
    return HostReport(host.name, Status.CHANGED if changed else Status.OK, reports)


def converge(hosts: list[Host], recipe: Recipe, *, check: bool = False, journal: RunJournal | None = None,
             timeout: float = 600, progress: Callable[[str, str], Any] | None = None,
             max_workers: int = 16) -> list[HostReport]:
    """Converge every host; the list has one report per host, in order, whatever happened."""
    outcomes = run_on_hosts(hosts, lambda s: converge_host(s, recipe, check=check, timeout=timeout,
                                                           progress=progress),
                            journal=journal, max_workers=max_workers)
    reports = []
    for host in hosts:
        outcome = outcomes[host.name]
        if outcome.ok:
            report = outcome.value
        else:
            report = HostReport(host.name, Status.FAILED, error=outcome.error, hint=outcome.hint)
        report.duration_s = outcome.duration_s
        reports.append(report)
    return reports


def exit_code_for(reports: list[HostReport], check: bool) -> int:
    from fxctl.errors import ExitCode

    if any(r.status == Status.FAILED for r in reports):
        not_converged = all(r.pending_after_apply for r in reports if r.status == Status.FAILED)
        return ExitCode.NOT_CONVERGED if not_converged else ExitCode.HOST_FAILED
    if check and any(r.status == Status.PENDING for r in reports):
        return ExitCode.CHANGES_PENDING
    return ExitCode.OK


def summary_rows(reports: list[HostReport], verbose: int = 0) -> list[list[str]]:
    rows = []
    for report in reports:
        if not report.steps:
            rows.append([report.host, "-", report.status.value, report.error or ""])
        for step in report.steps:
            detail = step.reason if step.status != Status.CHANGED else f"{len(step.commands)} command(s)"
            if verbose and step.commands:
                detail = "\n".join(step.commands)
            rows.append([report.host, step.step, step.status.value, tail(detail, 6)])
        if report.steps and report.error and not any(s.status == Status.FAILED for s in report.steps):
            rows.append([report.host, "(verify)", "failed", report.error])
    return rows
