"""The router in front of a deployment's replicas: one vllm-router per deployment.

Why vllm-router (PyPI `vllm-router`, the vLLM project's router, a Rust binary behind a Python launcher): it
runs as one process from a list of worker URLs, the shape fxctl's SSH deployment has; it routes by the
policies the field uses (cache_aware: the replica whose past requests share the longest prefix, unless the
load is too uneven; consistent_hash; power_of_two; round_robin; random); its /health answers 200 only when
its workers do; it passes the OpenAI API through (/v1/models, /v1/completions, /v1/chat/completions) and
exports per-worker Prometheus counters. production-stack's router and llm-d's endpoint picker are the same
idea bound to Kubernetes (service discovery, Envoy ext-proc); docs/serve.md (On Kubernetes) maps fxctl's
roles onto them.

Placement and life cycle: on the inventory's serve.router.host or the first serving host; started after
every instance of every host is ready (it waits for its workers' /health itself too), stopped before them;
its state and log live beside the instances' (<state>/<name>/router/), so `serve status|stop|logs` find it.
It listens on all interfaces (it is THE endpoint); its metrics only on 127.0.0.1 (read on the host).
"""

from __future__ import annotations

from dataclasses import replace

from fxctl.engine.fact import ANY_EXIT, Fact, gather_facts
from fxctl.facts.serving import BusyPorts, failure, with_stderr
from fxctl.remote.command import sh
from fxctl.serve.render import InstancePlan, RouterLine
from fxctl.serve.roles import Role
from fxctl.serve.router_settings import PORT_OFFSET
from fxctl.serve.settings import ServeSettings

ENTRY = ("-m", "vllm_router.launch_router")   # the console script's module: no path beside python to guess
DIST = "vllm-router"
# Runs on the host with the serving env's python: vllm_router imports, and its version
VERSION_PROBE = "import vllm_router; from importlib.metadata import version; print(version('vllm-router'))"


def router_port(settings: ServeSettings) -> int:
    return settings.router.port or settings.port + PORT_OFFSET


def wanted(settings: ServeSettings, hosts: int) -> bool:
    """on / off as set; auto: vLLM replicas, more than one engine over all hosts."""
    mode = settings.router.mode
    if mode != "auto":
        return mode == "on"
    return settings.engine == "vllm" and settings.instances * max(hosts, 1) > 1


def worker_url(address: str, port: int) -> str:
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def worker_urls(engines: list[InstancePlan], address_of) -> list[str]:
    """Each engine's URL as the router host reaches it: the inventory address of its host."""
    return [worker_url(address_of(p.host), p.port) for p in engines if p.role == Role.ENGINE]


def router_argv(line: RouterLine) -> tuple[str, ...]:
    return (line.python, *ENTRY, "--host", "0.0.0.0", "--port", str(line.port), "--worker-urls", *line.workers,
            "--policy", line.policy, "--prometheus-host", line.metrics_host, "--prometheus-port", str(line.port + 1))


def plan_router(settings: ServeSettings, host: str, workers: list[str]) -> InstancePlan:
    line = RouterLine(settings.python, router_port(settings), tuple(workers), settings.router.policy,
                      settings.metrics_address)
    directory = f"{settings.state_dir}/{settings.name}/router"
    return InstancePlan(
        deployment=settings.name, index=0, host=host, port=line.port, gpus=(), env={"NO_COLOR": "1"},
        argv=router_argv(line), lmcache_config=None, config_path=None, log_path=f"{directory}/router.log",
        state_path=f"{directory}/instance.json", data_dir=directory, unit=f"fxctl-router-{settings.name}",
        engine=settings.engine, offload=settings.offload, role=Role.ROUTER, metrics_port=line.port + 1, router=line)


def with_policy(plan: InstancePlan, policy: str) -> InstancePlan:
    """The same router with another policy (tune sweeps it; the workers and ports stay)."""
    line = replace(plan.router, policy=policy)
    return replace(plan, router=line, argv=router_argv(line))


def describe(plan: InstancePlan) -> str:
    """What `serve start` reports in the router's tier column."""
    line = plan.router
    return f"vllm-router, policy {line.policy}, {len(line.workers)} workers: {' '.join(line.workers)}"


# Runs on the router's host with its python3: GET <worker>/health for each URL in argv; print the ones that fail
UNREACHABLE = r"""
import sys, urllib.request
bad = []
for url in sys.argv[1:]:
    try:
        urllib.request.urlopen(url + "/health", timeout=5).read()
    except Exception as e:
        bad.append(url + " (" + type(e).__name__ + ": " + str(getattr(e, "reason", e))[:80] + ")")
print("\n".join(bad))
"""


class Unreachable(Fact):
    """The workers that do not answer /health from this host: {"bad": [...]}, or {"error": ...}."""

    ok_codes = ANY_EXIT

    def __init__(self, workers: tuple[str, ...]):
        self.workers = workers

    def command(self):
        return with_stderr(sh("python3", "-c", UNREACHABLE, *self.workers))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        if exit_code != 0:
            return failure(stdout, exit_code)
        return {"bad": [line for line in stdout.splitlines() if line.strip()]}


class RouterVersion(Fact):
    """vllm-router's version in the serving env: {"version": ...}, or {"error": what the python said}."""

    ok_codes = ANY_EXIT

    def __init__(self, python: str):
        self.python = python

    def command(self):
        return with_stderr(sh(self.python, "-c", VERSION_PROBE))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        lines = stdout.strip().splitlines()
        if exit_code == 0 and lines:
            return {"version": lines[-1].strip()}
        return failure(stdout, exit_code, 1)


def judge_workers(host: str, workers: list[str], found: dict, result) -> None:
    if found.get("bad") == []:
        result.add("router workers", "ok", f"{len(workers)} answer /health from {host}")
    else:
        result.add("router workers", "failed", f"from {host}: {'; '.join(found.get('bad', [])) or found.get('error')}",
                   "the engines must listen on an address the router's host reaches (the inventory address of "
                   "their host); check routes and firewalls between the hosts")


def endpoint(plan: InstancePlan, address: str) -> str:
    return worker_url(address, plan.port) + "/v1"


def check_router(machine, settings: ServeSettings, workers: list[str], result) -> None:
    """Pre-flight on the router's host: vllm-router imports in the serving env at the known-good version,
    every worker given answers /health from there (the router would wait for them for 10 minutes), and its
    two ports are free."""
    from fxctl.serve.preflight import KNOWN_GOOD_FLEET

    good = KNOWN_GOOD_FLEET[DIST]
    ports = [router_port(settings), router_port(settings) + 1]
    wanted = {"version": RouterVersion(settings.python), "ports": BusyPorts(tuple(ports))}
    if workers:   # none in start --check: the engines are not started yet
        wanted["workers"] = Unreachable(tuple(workers))
    read = gather_facts(machine, wanted, timeout=60)
    have = read["version"].get("version")
    if have == good:
        result.add(f"python:{DIST}", "ok", f"{DIST} {have}")
    else:
        result.add(f"python:{DIST}", "failed", f"{settings.python}: {DIST} "
                   f"{have or 'does not import: ' + read['version']['error']}, known good {good}",
                   f"fxctl serve install-env (CPU hosts) or {settings.python} -m pip install {DIST}=={good}")
    if workers:
        judge_workers(machine.name, workers, read["workers"], result)
    busy = read["ports"]
    if busy.get("busy"):
        result.add("router ports", "failed", f"port(s) {', '.join(map(str, busy['busy']))} already in use on "
                   f"{machine.name}", "stop what listens there or set serve.router.port")
    elif "error" in busy:
        result.add("router ports", "warn", f"could not check ports {ports}: {busy['error']}")
    else:
        result.add("router ports", "ok", f"{ports[0]}, {ports[1]} free")
