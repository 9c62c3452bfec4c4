"""`fxctl serve` as library calls: start (pre-flight, launch, readiness, tier check), status, stop, logs,
restart, on this machine or on the inventory's serving hosts (each host gets an outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fxctl.errors import FxError
from fxctl.remote.pool import HostOutcome
from fxctl.serve import launch, wheel
from fxctl.serve.machine import LOCAL
from fxctl.serve.preflight import Check, run_preflight
from fxctl.serve.render import InstancePlan, ServeSettings, plan_instances, with_site_dir
from fxctl.serve.where import Where  # noqa: F401  (callers use deploy.Where)

DEFAULT_READY_TIMEOUT_S = 600.0


def local_state_dir() -> str:
    """$FXCTL_SERVE_STATE, or $XDG_STATE_HOME/fxctl/serve (~/.local/state/fxctl/serve)."""
    from fxctl.paths import serve_state_dir

    return str(serve_state_dir())


@dataclass
class StartedInstance:
    host: str
    unit: str
    port: int
    mode: str
    models: list[str]
    tier: str
    command_line: str
    log_path: str


@dataclass
class HostStart:
    host: str
    checks: list[Check] = field(default_factory=list)
    instances: list[StartedInstance] = field(default_factory=list)


def dry_run(settings: ServeSettings, where: Where) -> list[InstancePlan]:
    names = [LOCAL] if where.local else [h.name for h in where.hosts]
    if not where.local and settings.engine == "sim" and "/" in settings.profile:  # start ships the file there
        settings = replace(settings, profile=f"{settings.state_dir}/{settings.name}/profile.yaml")
    return [plan for name in names for plan in plan_instances(settings, name)]


def start(settings: ServeSettings, where: Where, *, ready_timeout: float = DEFAULT_READY_TIMEOUT_S,
          preflight: bool = True, install: bool = True) -> dict[str, HostOutcome]:
    """Pre-flight, then launch every instance and wait until each is ready and its tier is up."""

    def work(machine) -> HostStart:
        outcome = HostStart(machine.name)
        effective = settings
        for plan in plan_instances(settings, machine.name):   # before pre-flight: its port check would say "busy"
            launch.ensure_not_running(machine, plan)
        if preflight:
            checked = run_preflight(machine, settings, install=install, local=where.local)
            outcome.checks = checked.checks
            if not checked.ok:
                failed = [c for c in checked.checks if c.status == "failed"]
                raise PreflightFailed(outcome, failed)
            effective = with_site_dir(settings, checked.site_dir)
        elif where.local:
            effective = with_site_dir(settings, str(wheel.REPO))
        if not where.local and effective.engine == "sim" and "/" in effective.profile:
            effective = ship_profile(machine, effective)   # a profile file of the user's: the wheel has the rest
        started: list[tuple[InstancePlan, str]] = []
        try:
            launch_in_order(machine, plan_instances(effective, machine.name), ready_timeout, outcome, started)
        except FxError:
            for plan, mode in reversed(started):  # a half-started deployment is worse than none
                launch.stop_instance(machine, plan, mode)
            raise
        return outcome

    return where.each(work)


def launch_in_order(machine, plans: list[InstancePlan], ready_timeout: float, outcome: HostStart,
                    started: list[tuple[InstancePlan, str]]) -> None:
    """LMCache's MP server first (vLLM connects to it at start-up), then every engine; each group is launched
    together and then waited for. `started` collects what runs, for the caller to stop on failure."""
    for group in ([p for p in plans if p.is_server], [p for p in plans if not p.is_server]):
        batch = [(plan, launch.start_instance(machine, plan)) for plan in group]
        started.extend(batch)
        for plan, mode in batch:
            models = launch.wait_ready(machine, plan, mode, ready_timeout)
            tier = launch.confirm_tier(machine, plan)
            outcome.instances.append(StartedInstance(machine.name, plan.unit, plan.port, mode, models, tier,
                                                     plan.shell_line(), plan.log_path))


def stop_order(saved: list[tuple[InstancePlan, str]]) -> list[tuple[InstancePlan, str]]:
    """Engines before the LMCache server they use."""
    return sorted(saved, key=lambda item: (item[0].deployment, item[0].is_server, item[0].index))


def ship_profile(machine, settings: ServeSettings) -> ServeSettings:
    """Copy a profile file given by path to the host (shipped profiles travel inside fxctl's wheel)."""
    from fxctl.sim.profile import resolve_profile_path

    remote = f"{settings.state_dir}/{settings.name}/profile.yaml"
    machine.upload(resolve_profile_path(settings.profile), remote)
    return replace(settings, profile=remote)


class PreflightFailed(FxError):
    def __init__(self, outcome: HostStart, failed: list[Check]):
        lines = "".join(f"\n  {c.host}: {c.check}: {c.detail}" + (f"\n    fix: {c.fix}" if c.fix else "")
                        for c in failed)
        super().__init__(f"pre-flight failed ({len(failed)} check(s)):{lines}", "fix each, then start again "
                         "(--skip-preflight launches anyway)")
        self.outcome = outcome


def status(where: Where, state_dir: str, name: str | None = None) -> dict[str, HostOutcome]:
    def work(machine) -> list[launch.InstanceStatus]:
        return [launch.instance_status(machine, plan, mode)
                for plan, mode in launch.saved_plans(machine, state_dir, name)]
    return where.each(work)


def stop(where: Where, state_dir: str, name: str | None = None) -> dict[str, HostOutcome]:
    def work(machine) -> list[dict]:
        out = []
        saved = launch.saved_plans(machine, state_dir, name)
        if name and not saved:
            raise FxError(f"{machine.name}: no deployment named {name!r}", "fxctl serve status lists them")
        for plan, mode in stop_order(saved):
            was_running = launch.stop_instance(machine, plan, mode)
            out.append({"host": machine.name, "unit": plan.unit, "was_running": was_running, "stopped": True})
        return out
    return where.each(work)


def logs(where: Where, state_dir: str, name: str | None, lines: int) -> dict[str, HostOutcome]:
    def work(machine) -> list[dict]:
        return [{"host": machine.name, "unit": plan.unit, "log_path": plan.log_path,
                 "text": launch.log_tail(machine, plan, lines)}
                for plan, _ in launch.saved_plans(machine, state_dir, name)]
    return where.each(work)


def restart(where: Where, state_dir: str, name: str | None, *,
            ready_timeout: float = DEFAULT_READY_TIMEOUT_S) -> dict[str, HostOutcome]:
    """Stop and start again exactly what was started (the saved plans), then wait for readiness."""

    def work(machine) -> HostStart:
        outcome = HostStart(machine.name)
        saved = launch.saved_plans(machine, state_dir, name)
        if not saved:
            raise FxError(f"{machine.name}: no deployment{' ' + name if name else ''} to restart",
                          "fxctl serve start first")
        for plan, mode in stop_order(saved):
            launch.stop_instance(machine, plan, mode)
        launch_in_order(machine, [plan for plan, _ in saved], ready_timeout, outcome, [])
        return outcome

    return where.each(work)


def local_settings(settings: ServeSettings) -> ServeSettings:
    return replace(settings, state_dir=local_state_dir())
