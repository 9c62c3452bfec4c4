"""Start a Ray deployment (fxctl.serve.ray_cluster's plans) on its hosts, check it, stop and report its nodes.

Start, in order, each step on every host it concerns before the next:
  1. pre-flight host by host (the usual checks, then the Ray node's: ray's version, fxctl's vLLM platform
     plugin on CPU hosts, Ray's ports), then the versions compared across hosts (python, ray, vLLM);
  2. the Ray head on the first host, until `ray status` answers there;
  3. a Ray worker node on every other host, until the head counts every node and its worker slots;
  4. vLLM on the head with Ray as its executor, until /health and /v1/models answer.
A failure stops what was started, in reverse (vLLM, the workers, the head), and says which host and step.
Stop (fxctl.serve.deploy.stop) ends vLLM first, then the workers, then the head, and each node's stop is
checked: no process of the node (by its Ray temp dir) may be left.
"""

from __future__ import annotations

from fxctl.engine.apply import Status
from fxctl.errors import FxError
from fxctl.poll import until
from fxctl.remote.pool import HostOutcome
from fxctl.serve import launch, ray_cluster
from fxctl.serve.deploy import HostStart, PreflightFailed, StartedInstance
from fxctl.serve.preflight import Check, run_preflight
from fxctl.serve.render import InstancePlan
from fxctl.serve.settings import ServeSettings, with_site_dir
from fxctl.serve.warm_up import WARM_UP_TIMEOUT_S, warm_up
from fxctl.serve.where import Where

POLL_S = 2.0


def nodes_of(where: Where) -> list[tuple[str, str]]:
    return [(h.name, h.address) for h in where.hosts]


def start(settings: ServeSettings, where: Where, *, ready_timeout: float, preflight: bool = True,
          install: bool = True) -> dict[str, HostOutcome]:
    nodes = nodes_of(where)
    plans = ray_cluster.plan_cluster(settings, nodes)   # BadInput before anything runs
    outcomes = {name: HostStart(name) for name, _ in nodes}
    started: list[tuple[InstancePlan, str, Where]] = []
    step = "pre-flight"
    try:
        site_dir = preflight_all(settings, where, outcomes, install) if preflight else None
        effective = with_site_dir(settings, site_dir) if site_dir else settings
        plans = ray_cluster.plan_cluster(effective, nodes)
        head, workers, engine = plans[0], plans[1:-1], plans[-1]
        step = "Ray head"
        launch_on(one(where, head.host), [head], outcomes, started)
        wait_for(one(where, head.host), lambda m: ray_cluster.cluster_state(m, effective, nodes[0][1]) is not None,
                 ready_timeout, f"the Ray head on {head.host} did not answer `ray status`", head)
        step = "Ray workers"
        if workers:
            launch_on(Where([h for h in where.hosts if h.name != head.host]), workers, outcomes, started)
        wait_for(one(where, head.host), lambda m: ray_cluster.cluster_complete(
            ray_cluster.cluster_state(m, effective, nodes[0][1]), effective), ready_timeout,
            f"the Ray cluster did not reach {settings.pipeline_parallel} nodes with {settings.tensor_parallel} "
            "worker slot(s) each", head)
        step = "vLLM"
        launch_on(one(where, engine.host), [engine], outcomes, started, ready_timeout=ready_timeout)
    except StepFailed as failed:
        stop_started(started)
        return failed_outcomes(outcomes, failed.host, step, failed.error, failed.hint)
    return {name: HostOutcome(name, True, value=outcome) for name, outcome in outcomes.items()}


class StepFailed(Exception):
    def __init__(self, host: str, error: str, hint: str | None):
        super().__init__(error)
        self.host, self.error, self.hint = host, error, hint


def one(where: Where, name: str) -> Where:
    return Where([h for h in where.hosts if h.name == name])


def raise_failed(answers: dict[str, HostOutcome]) -> None:
    for host, answer in answers.items():
        if not answer.ok:
            raise StepFailed(host, answer.error or "failed", answer.hint)


def preflight_all(settings: ServeSettings, where: Where, outcomes: dict[str, HostStart], install: bool) -> str | None:
    """Host by host (hosts may share one serving env, as the tests' do: no two pip installs into it at once)."""
    versions: dict[str, dict] = {}
    site_dir = None
    for index, host in enumerate(where.hosts):
        def work(machine, index=index) -> tuple[str | None, dict | None]:
            for plan in ray_cluster.plan_cluster(settings, nodes_of(where)):
                if plan.host == machine.name:
                    launch.ensure_not_running(machine, plan)
            checked = run_preflight(machine, settings, install=install, local=False)
            facts = ray_cluster.check_node(machine, settings, checked, index)
            outcomes[machine.name].checks = checked.checks
            if not checked.ok:
                raise PreflightFailed(outcomes[machine.name], checked.failed)
            return checked.site_dir, facts
        answers = Where([host], journal=where.journal).each(work)
        raise_failed(answers)
        site_dir, versions[host.name] = answers[host.name].value
    differ = ray_cluster.mismatches(versions)
    first = where.hosts[0].name
    outcomes[first].checks.append(Check(first, "same versions", Status.FAILED if differ else Status.OK,
                                        "; ".join(differ) or f"python, ray and vLLM alike on {len(versions)} hosts",
                                        "install the same serving env everywhere (fxctl serve install-env)"
                                        if differ else ""))
    if differ:
        raise StepFailed(first, "pre-flight failed: the hosts' versions differ: " + "; ".join(differ),
                         "Ray joins only nodes with the same python and ray; vLLM's stages must match")
    return site_dir


def launch_on(where: Where, plans: list[InstancePlan], outcomes: dict[str, HostStart],
              started: list[tuple[InstancePlan, str, Where]], ready_timeout: float | None = None) -> None:
    """Start each host's plan (vLLM: and wait until it serves); record what runs for stop_started."""
    by_host = {p.host: p for p in plans}

    def work(machine) -> str:
        plan = by_host[machine.name]
        mode = launch.start_instance(machine, plan)
        started.append((plan, mode, Where([h for h in where.hosts if h.name == machine.name])))
        models: list[str] = []
        tier = f"Ray node ({plan.role}) at {plan.env.get('VLLM_HOST_IP')}, temp dir {plan.data_dir}"
        warmed = ""
        if ready_timeout is not None:   # vLLM on the head: ready, its tier, and its warm-up as a single host's
            models = launch.wait_ready(machine, plan, mode, ready_timeout)
            tier = launch.confirm_tier(machine, plan)
            warmed = warm_up(machine, plan, models[0], min(ready_timeout, WARM_UP_TIMEOUT_S)) if models else ""
        outcomes[machine.name].instances.append(StartedInstance(machine.name, plan.unit, plan.port, mode, models,
                                                                tier, plan.shell_line(), plan.log_path, warmed))
        return mode

    raise_failed(where.each(work))


def wait_for(where: Where, done, timeout_s: float, what: str, plan: InstancePlan) -> None:
    def work(machine) -> None:
        def finished() -> bool:
            if done(machine):
                return True
            if not launch.instance_alive(machine, plan, launch.read_mode(machine, plan)):
                raise FxError(f"{machine.name}: {plan.unit} exited; last lines of {plan.log_path}:\n"
                              f"{launch.log_tail(machine, plan)}", "fxctl serve logs --name " + plan.deployment)
            return False

        if not until(finished, timeout_s, every_s=POLL_S):
            raise FxError(f"{what} within {timeout_s:.0f} s", f"see {plan.log_path} on {machine.name} and the "
                          "Ray nodes' logs under their temp dirs")

    raise_failed(where.each(work))


def stop_started(started: list[tuple[InstancePlan, str, Where]]) -> None:
    """A half-started deployment is worse than none: stop in reverse (vLLM, workers, head)."""
    for plan, mode, where in reversed(started):
        where.each(lambda machine, plan=plan, mode=mode: ray_cluster.stop_node(machine, plan, mode))


def failed_outcomes(outcomes: dict[str, HostStart], host: str, step: str, error: str,
                    hint: str | None) -> dict[str, HostOutcome]:
    out = {}
    for name, outcome in outcomes.items():
        if name == host:
            out[name] = HostOutcome(name, False, value=outcome, error=f"{step}: {error}", hint=hint)
        else:
            out[name] = HostOutcome(name, False, value=outcome, error=f"stopped: the Ray deployment failed at "
                                    f"{step} on {host}", hint="see that host's error")
    return out
