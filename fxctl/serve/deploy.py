"""`fxctl serve` as library calls: start (pre-flight, launch, readiness, tier check), status, stop, logs,
restart, on this machine or on the inventory's serving hosts (each host gets an outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from fxctl.errors import BadInput, FxError
from fxctl.remote.machine import LOCAL, LocalMachine
from fxctl.remote.pool import HostOutcome
from fxctl.serve import launch, ray_cluster, router, wheel
from fxctl.serve.preflight import Check, Preflight, run_preflight
from fxctl.serve.render import InstancePlan, plan_instances
from fxctl.serve.roles import RAY, Role
from fxctl.serve.settings import ServeSettings, with_site_dir
from fxctl.serve.warm_up import WARM_UP_TIMEOUT_S, warm_up
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
    warm_up: str = ""     # a vLLM engine: its warm-up request (fxctl.serve.warm_up)


@dataclass
class HostStart:
    host: str
    checks: list[Check] = field(default_factory=list)
    instances: list[StartedInstance] = field(default_factory=list)
    endpoint: str | None = None        # the router's URL: where clients go (set on the router's host)


def dry_run(settings: ServeSettings, where: Where) -> list[InstancePlan]:
    names = [LOCAL] if where.local else [h.name for h in where.hosts]
    if ray_cluster.uses_ray(settings):   # one model across the hosts: Ray nodes, vLLM on the head
        return ray_cluster.plan_cluster(settings, [(h.name, h.address) for h in where.hosts])
    if not where.local and settings.engine == "sim" and "/" in settings.profile:  # start ships the file there
        settings = replace(settings, profile=f"{settings.state_dir}/{settings.name}/profile.yaml")
    plans = [plan for name in names for plan in plan_instances(settings, name)]
    return plans + ([router_plan(settings, where)] if router.wanted(settings, len(names)) else [])


def router_plan(settings: ServeSettings, where: Where) -> InstancePlan:
    names = [LOCAL] if where.local else [h.name for h in where.hosts]
    place = where.router_place()
    workers = router.worker_urls([p for name in names for p in plan_instances(settings, name)], where.address_of)
    return router.plan_router(settings, LOCAL if place.local else place.hosts[0].name, workers)


def check(settings: ServeSettings, where: Where) -> dict[str, HostOutcome]:
    """`serve start --check`: what start would find and do on each host, changing nothing there. The
    pre-flight's checks, read only (what start would install is a "pending" check, nothing is uploaded),
    the refusal start would make (an instance already running), and the router's host's checks."""

    def work(machine) -> HostStart:
        outcome = HostStart(machine.name)
        for plan in [] if ray_cluster.uses_ray(settings) else plan_instances(settings, machine.name):
            launch.ensure_not_running(machine, plan)
        outcome.checks = run_preflight(machine, settings, local=where.local, plan=True).checks
        return outcome

    outcomes = where.each(work)
    if router.wanted(settings, len(outcomes)) and not ray_cluster.uses_ray(settings):
        plan = router_plan(settings, where)

        def router_work(machine) -> HostStart:
            launch.ensure_not_running(machine, plan)
            checked = Preflight(machine.name)
            router.check_router(machine, settings, [], checked)   # its workers are not started yet
            return HostStart(machine.name, checks=checked.checks)

        answer = where.router_place().each(router_work)[plan.host]
        mine = outcomes.get(plan.host)
        if answer.ok and mine is not None and mine.ok:
            mine.value.checks += answer.value.checks
        else:
            outcomes[plan.host if mine is None else f"{plan.host}/router"] = answer
    return outcomes


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
                failed = checked.failed
                raise PreflightFailed(outcome, failed)
            effective = with_site_dir(settings, checked.site_dir)
        elif where.local:
            source = wheel.checkout()
            effective = with_site_dir(settings, str(source) if source else None)
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

    outcomes = where.each(work)
    if router.wanted(settings, len(outcomes)):
        start_router(settings, where, outcomes, ready_timeout, preflight)
    return outcomes


def start_router(settings: ServeSettings, where: Where, outcomes: dict[str, HostOutcome], ready_timeout: float,
                 preflight: bool) -> None:
    """After every host's instances are ready: pre-flight the router's host, launch the router, wait until it
    answers. Its row joins its host's outcome; a failure (or hosts that failed first) is its own entry."""
    plan = router_plan(settings, where)
    key = f"{plan.host}/router"
    failed = [h for h, o in outcomes.items() if not o.ok]
    if failed:
        outcomes[key] = HostOutcome(plan.host, False, error=f"router not started: {', '.join(failed)} failed",
                                    hint="fix those hosts and start again")
        return

    def work(machine) -> HostStart:
        outcome = HostStart(machine.name)
        launch.ensure_not_running(machine, plan)
        if preflight:
            checked = Preflight(machine.name)
            router.check_router(machine, settings, list(plan.router.workers), checked)
            outcome.checks = checked.checks
            if not checked.ok:
                raise PreflightFailed(outcome, checked.failed)
        started: list[tuple[InstancePlan, str]] = []
        try:
            launch_in_order(machine, [plan], ready_timeout, outcome, started)
        except FxError:
            for item in started:
                launch.stop_instance(machine, *item)
            raise
        address = "127.0.0.1" if where.local else where.router_place().hosts[0].address
        outcome.endpoint = router.endpoint(plan, address)
        return outcome

    answer = where.router_place().each(work)[plan.host]
    mine = outcomes.get(plan.host)
    if answer.ok and mine is not None:
        mine.value.checks += answer.value.checks
        mine.value.instances += answer.value.instances
        mine.value.endpoint = answer.value.endpoint
    else:
        outcomes[plan.host if answer.ok else key] = answer


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
            warmed = warm_up(machine, plan, models[0], min(ready_timeout, WARM_UP_TIMEOUT_S)) if models else ""
            outcome.instances.append(StartedInstance(machine.name, plan.unit, plan.port, mode, models, tier,
                                                     plan.shell_line(), plan.log_path, warmed))


def stop_order(saved: list[tuple[InstancePlan, str]]) -> list[tuple[InstancePlan, str]]:
    """The router before the engines it sends to, engines before the Ray cluster they run on and the LMCache
    server they use."""
    rank = {Role.ROUTER: 0, Role.ENGINE: 1, Role.RAY_HEAD: 2, Role.RAY_WORKER: 3, Role.LMCACHE_SERVER: 4}
    return sorted(saved, key=lambda item: (item[0].deployment, rank[item[0].role], item[0].index))


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
        self.partial = outcome   # the host's checks reach start's output (-o json: "checks")


def status(where: Where, state_dir: str, name: str | None = None) -> dict[str, HostOutcome]:
    def work(machine) -> list[launch.InstanceStatus]:
        saved = ray_cluster.on_this_host(machine, launch.saved_plans(machine, state_dir, name))
        return [(ray_cluster.node_status if plan.role in RAY else launch.instance_status)(
                    machine, plan, mode) for plan, mode in saved]
    return where.with_router().each(work)


STOP_PHASES = ((Role.ROUTER,), None, (Role.RAY_WORKER,), (Role.RAY_HEAD,))   # None: every other role


def stop(where: Where, state_dir: str, name: str | None = None) -> dict[str, HostOutcome]:
    """Routers first, on every host (no request reaches an engine that is stopping), then engines and LMCache
    servers; a Ray deployment's worker nodes after its vLLM, its head last (each node checked for leftovers)."""
    named = {role for phase in STOP_PHASES if phase for role in phase}
    ray_seen: list[bool] = []

    def work(machine, phase) -> list[dict]:
        out = []
        saved = ray_cluster.on_this_host(machine, launch.saved_plans(machine, state_dir, name))
        if name and not saved and phase is None:
            raise FxError(f"{machine.name}: no deployment named {name!r}", "fxctl serve status lists them")
        ray_seen.extend(p.role in RAY for p, _ in saved)
        for plan, mode in stop_order(saved):
            if (plan.role not in named) if phase is None else plan.role in phase:
                was_running = ray_cluster.stop_node(machine, plan, mode)
                out.append({"host": machine.name, "unit": plan.unit, "was_running": was_running, "stopped": True})
        return out

    everywhere = where.with_router()
    outcomes = everywhere.each(lambda machine: work(machine, STOP_PHASES[0]))
    for phase in STOP_PHASES[1:]:
        if phase is None or any(ray_seen):
            outcomes = joined(outcomes, everywhere.each(lambda machine, phase=phase: work(machine, phase)))
    return outcomes


def joined(first: dict[str, HostOutcome], then: dict[str, HostOutcome]) -> dict[str, HostOutcome]:
    """Per host: both steps' lists, or the first step's failure."""
    out = {}
    for host, o in then.items():
        before = first.get(host)
        if before is not None and not before.ok:
            out[host] = before
        else:
            out[host] = o if not o.ok else HostOutcome(host, True, value=(before.value if before else []) + o.value,
                                                       duration_s=o.duration_s)
    return out


def logs(where: Where, state_dir: str, name: str | None, lines: int) -> dict[str, HostOutcome]:
    def work(machine) -> list[dict]:
        return [{"host": machine.name, "unit": plan.unit, "log_path": plan.log_path,
                 "text": launch.log_tail(machine, plan, lines)}
                for plan, _ in launch.saved_plans(machine, state_dir, name)]
    return where.with_router().each(work)


def restart(where: Where, state_dir: str, name: str | None, *,
            ready_timeout: float = DEFAULT_READY_TIMEOUT_S) -> dict[str, HostOutcome]:
    """Stop and start again exactly what was started (the saved plans), then wait for readiness: routers
    stopped first on every host, engines (and their LMCache servers) restarted, routers started last."""

    def saved_of(machine, routers: bool) -> list[tuple[InstancePlan, str]]:
        return [(p, m) for p, m in stop_order(launch.saved_plans(machine, state_dir, name))
                if (p.role == Role.ROUTER) == routers]

    def stop_routers(machine) -> list:
        return [launch.stop_instance(machine, plan, mode) for plan, mode in saved_of(machine, True)]

    def restart_engines(machine) -> HostStart:
        outcome = HostStart(machine.name)
        if not launch.saved_plans(machine, state_dir, name):
            raise FxError(f"{machine.name}: no deployment{' ' + name if name else ''} to restart",
                          "fxctl serve start first")
        mine = saved_of(machine, False)
        if any(plan.role in RAY for plan, _ in mine):
            raise FxError(f"{machine.name}: a Ray deployment is restarted with stop and start",
                          "fxctl serve stop --name NAME, then fxctl serve start with the same options")
        for plan, mode in mine:
            launch.stop_instance(machine, plan, mode)
        launch_in_order(machine, [plan for plan, _ in mine], ready_timeout, outcome, [])
        return outcome

    def start_routers(machine) -> HostStart:
        outcome = HostStart(machine.name)
        routers = [plan for plan, _ in saved_of(machine, True)]
        launch_in_order(machine, routers, ready_timeout, outcome, [])
        if routers:
            address = next((h.address for h in everywhere.hosts if h.name == machine.name), "127.0.0.1")
            outcome.endpoint = router.endpoint(routers[0], address)
        return outcome

    everywhere = where.with_router()
    stopped = everywhere.each(stop_routers)
    outcomes = everywhere.each(restart_engines)
    outcomes.update({h: o for h, o in stopped.items() if not o.ok})
    if all(o.ok for o in outcomes.values()):
        for host, o in everywhere.each(start_routers).items():
            if o.ok:
                outcomes[host].value.instances += o.value.instances
                outcomes[host].value.endpoint = o.value.endpoint
            else:
                outcomes[f"{host}/router"] = o
    return outcomes


def set_router_policy(where: Where, state_dir: str, name: str, policy: str, *,
                      ready_timeout: float = DEFAULT_READY_TIMEOUT_S) -> dict[str, HostOutcome]:
    """Restart the deployment's router with another policy (same workers and ports); the engines keep running.
    `fxctl tune --param serving.router.policy=...` sweeps it through here."""
    from fxctl.serve.router_settings import POLICIES

    if policy not in POLICIES:
        raise BadInput(f"router policy {policy!r}", f"one of {', '.join(POLICIES)}")

    def work(machine) -> HostStart:
        outcome = HostStart(machine.name)
        for plan, mode in launch.saved_plans(machine, state_dir, name):
            if plan.role == Role.ROUTER:
                launch.stop_instance(machine, plan, mode)
                launch_in_order(machine, [router.with_policy(plan, policy)], ready_timeout, outcome, [])
        return outcome

    outcomes = where.with_router().each(work)
    if all(o.ok for o in outcomes.values()) and not any(o.value.instances for o in outcomes.values()):
        raise FxError(f"deployment {name!r} has no router", "fxctl serve start --router on")
    return outcomes


def local_settings(settings: ServeSettings) -> ServeSettings:
    return replace(settings, state_dir=local_state_dir())


def switch_local_policy(url: str, policy: str, ready_timeout: float = 300.0) -> None:
    """The router of a deployment on this machine that listens on `url`'s port, restarted with `policy`
    (as `fxctl serve` would); FxError when no router of fxctl's listens there."""
    state = local_state_dir()
    port = urlparse(url).port
    mine = [p for p, _ in launch.saved_plans(LocalMachine(), state) if p.role == Role.ROUTER and p.port == port]
    if not mine:
        raise FxError(f"no router of fxctl serve on this machine listens on port {port}",
                      "--param serving.router.policy needs --url of a router `fxctl serve start --local` started")
    outcome = set_router_policy(Where(), state, mine[0].deployment, policy, ready_timeout=ready_timeout)["local"]
    if not outcome.ok:
        raise FxError(f"restarting the router with policy {policy} failed: {outcome.error}", outcome.hint)
