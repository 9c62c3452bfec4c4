"""Start, watch and stop one serving instance on a machine (this machine or a host over SSH).

Where systemd runs (/run/systemd/system exists) an instance is a transient unit
(`systemd-run --unit fxctl-serve-<name>-<i>`, output appended to its log file); elsewhere it is a
supervised process: started with `setsid` in a new session (its pid is its process group), pid in a
pidfile, output in the log file. Stopping ends the whole unit or process group and checks nothing is left.
Readiness: /health answers 200 and /v1/models lists a model, polled from the host itself, while watching
the process: if it exits first, the error carries the log's last lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from fxctl.engine.plan import Operation, run_operation
from fxctl.errors import FxError
from fxctl.poll import poll, until
from fxctl.remote.command import Command, script, sh, write_file
from fxctl.serve.lmcache_mode import LMCACHE_ADAPTER_OF
from fxctl.serve.render import PROMETHEUS_DIR, InstancePlan
from fxctl.serve.roles import LISTING, Role

LOG_TAIL = 30
# LMCache's own line when it built the plugin, or the plugin's line once its store is open
LOADED_LINE = re.compile(r"Created backend: fxtier \(FxTierBackend\)|fxtier: L2 at ")
LMCACHE_DISK_LINE = r"Created backend: LocalDiskBackend"
TIER_LOG_WORDS = re.compile(r"Created backend: \S+ \(\w+\)|fxtier: L2 at \S+")
STOP_WAIT_S = 15
STATE_SCHEMA = 1   # the version of instance.json's shape (read_state refuses newer ones)
SERVER_HEALTH = "/healthcheck"          # LMCache's MP server HTTP API (lmcache/v1/multiprocess/http_apis)
SERVER_ADAPTERS = "/config/adapters"

# Runs on the host with its own python3: GET each path, print one JSON line. argv: base URL, paths...
PROBE = r"""
import json, sys, urllib.request
out = {}
for path in sys.argv[2:]:
    try:
        with urllib.request.urlopen(sys.argv[1] + path, timeout=5) as r:
            out[path] = {"status": r.status, "body": r.read(200000).decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        out[path] = {"status": e.code, "body": ""}
    except Exception as e:
        out[path] = {"status": 0, "body": type(e).__name__ + ": " + str(e)}
print(json.dumps(out))
"""

@dataclass
class InstanceStatus:
    host: str
    deployment: str
    index: int
    engine: str            # vllm | sim: the deployment's engine
    role: str              # what this process is (fxctl.serve.roles.Role)
    mode: str              # systemd | process
    unit: str
    pid: int | None
    running: bool
    healthy: bool
    models: list[str]
    port: int
    log_path: str
    tier: dict | None = None   # fxctl's tier, per tier level (l1, l2): hits, misses, bytes, usage ... (its /metrics)
    load: dict | None = None   # engines: vLLM's request and prefix-cache counters; the router: requests per worker
    cluster: dict | None = None   # a Ray head: the nodes and resources its cluster counts (fxctl.serve.ray_cluster)

    @property
    def state(self) -> str:
        if not self.running:
            return "stopped"
        return "ready" if self.healthy else "starting"


def has_systemd(machine) -> bool:
    return machine.run(sh("test", "-d", "/run/systemd/system")).ok


def launch_command(plan: InstancePlan, mode: str) -> Command:
    """The command that starts the instance in the background and returns at once."""
    if mode == "systemd":
        props = [f"--property=StandardOutput=append:{plan.log_path}",
                 f"--property=StandardError=append:{plan.log_path}", "--property=KillMode=control-group",
                 f"--property=TimeoutStopSec={STOP_WAIT_S}"]
        env = [f"--setenv={k}={v}" for k, v in plan.env.items()]
        return sh("systemd-run", "--unit", plan.unit, "--collect", "--quiet", "--working-directory=/",
                  *props, *env, "--", *plan.argv)
    pidfile = pidfile_of(plan)
    env = [f"{k}={v}" for k, v in plan.env.items()]
    body = 'log=$1; pidfile=$2; shift 2; cd / && setsid "$@" >>"$log" 2>&1 </dev/null & echo $! >"$pidfile"'
    return script(body, plan.log_path, pidfile, "env", *env, *plan.argv)


def pidfile_of(plan: InstancePlan) -> str:
    return plan.state_path.rsplit("/", 1)[0] + "/pid"


def start_operation(plan: InstancePlan, mode: str) -> Operation:
    """The commands that start one instance, in order (an operation, as provision's are): its folders, its
    prometheus_client files emptied (its counters from 0), raw_block's device file (made once, never
    shrunk or rewritten: it holds the KV), the LMCache config and the state file, the log (the previous one
    kept as .1), then the launch, which returns at once."""
    directory = plan.state_path.rsplit("/", 1)[0]
    yield sh("mkdir", "-p", directory, plan.data_dir)
    metrics_dir = f"{directory}/{PROMETHEUS_DIR}"
    if plan.env.get("PROMETHEUS_MULTIPROC_DIR") == metrics_dir:
        yield sh("rm", "-rf", metrics_dir).then(sh("mkdir", "-p", metrics_dir))
    if plan.device_file:
        path, size = plan.device_file
        yield script('[ -e "$1" ] || truncate -s "$2" "$1"', path, str(size))
    if plan.config_path and plan.lmcache_config is not None:
        yield write_file(plan.config_path, plan.lmcache_yaml() or "", "0644")
    state = {"schema": STATE_SCHEMA, "mode": mode, "plan": plan.to_dict()}
    yield write_file(plan.state_path, json.dumps(state, indent=2) + "\n", "0644")
    keep_previous_log = 'if [ -f "$1" ]; then mv -f "$1" "$1.1"; fi; : >"$1"'
    yield sh("rm", "-f", pidfile_of(plan)).then(script(keep_previous_log, plan.log_path))
    if mode == "systemd":
        yield sh("systemctl", "reset-failed", plan.unit).quiet_errors().or_else(sh("true"))
    yield launch_command(plan, mode)
    return None


def start_instance(machine, plan: InstancePlan) -> str:
    """Start the instance (start_operation's commands, the first failure stops it); returns the mode used
    (systemd | process)."""
    ensure_not_running(machine, plan)
    mode = "systemd" if has_systemd(machine) else "process"
    for command in run_operation(f"start {plan.unit}", start_operation(plan, mode)).commands:
        machine.run(command, check=True)
    return mode


def ensure_not_running(machine, plan: InstancePlan) -> None:
    if instance_alive(machine, plan, read_mode(machine, plan)):
        raise FxError(f"{machine.name}: {plan.unit} is already running (port {plan.port})",
                      "fxctl serve stop (or restart) first")


def read_mode(machine, plan: InstancePlan) -> str:
    res = machine.run(sh("cat", plan.state_path))
    try:
        return json.loads(res.stdout)["mode"] if res.ok else "process"
    except (ValueError, KeyError):
        return "process"


def read_pid(machine, plan: InstancePlan) -> int | None:
    res = machine.run(sh("cat", pidfile_of(plan)))
    text = res.stdout.strip()
    return int(text) if res.ok and text.isdigit() else None


def instance_alive(machine, plan: InstancePlan, mode: str) -> bool:
    if mode == "systemd":
        res = machine.run(sh("systemctl", "is-active", plan.unit))
        return res.stdout.strip() in ("active", "activating", "deactivating", "reloading")
    pid = read_pid(machine, plan)
    # the process group (pid == pgid: setsid) still has a member that is not a zombie
    return pid is not None and bool(group_members(machine, pid))


def group_members(machine, pgid: int) -> list[int]:
    res = machine.run(sh("ps", "-eo", "pid=,pgid=,stat="))
    members = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == str(pgid) and not parts[2].startswith("Z"):
            members.append(int(parts[0]))
    return members


def unit_main_pid(machine, plan: InstancePlan) -> int | None:
    res = machine.run(sh("systemctl", "show", "-p", "MainPID", "--value", plan.unit))
    text = res.stdout.strip()
    return int(text) if res.ok and text.isdigit() and text != "0" else None


def tier_metrics(machine, plan: InstancePlan) -> dict | None:
    """fxctl's tier as its own /metrics endpoint reports it (None when the plan exports none or it is silent)."""
    from fxctl.kvtier.metrics import tier_summary

    if not plan.metrics_port:
        return None
    answer = probe(machine, plan, "/metrics", port=plan.metrics_port)["/metrics"]
    return tier_summary(answer["body"]) if answer["status"] == 200 else None


def probe(machine, plan: InstancePlan, *paths: str, port: int | None = None) -> dict:
    res = machine.run(sh("python3", "-c", PROBE, f"http://127.0.0.1:{port or plan.port}", *paths), timeout=30)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {p: {"status": 0, "body": res.tail(3)} for p in paths}


def model_ids(body: str) -> list[str]:
    try:
        return [m["id"] for m in json.loads(body).get("data", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return []


def log_tail(machine, plan: InstancePlan, lines: int = LOG_TAIL) -> str:
    return machine.run(sh("tail", "-n", str(lines), plan.log_path)).stdout


def wait_ready(machine, plan: InstancePlan, mode: str, timeout_s: float) -> list[str]:
    """Poll until /health is 200 and /v1/models lists a model (the LMCache server: its health check); FxError
    with the log tail on early exit or after timeout_s."""
    health: dict = {}

    def ready() -> list[str] | None:
        if not instance_alive(machine, plan, mode):
            raise FxError(f"{machine.name}: {plan.unit} exited before it was ready; last lines of "
                          f"{plan.log_path}:\n{log_tail(machine, plan)}",
                          f"fxctl serve logs --name {plan.deployment}; check the command with --dry-run")
        if plan.is_server:   # LMCache's MP server: its HTTP API's health check
            health.update(probe(machine, plan, SERVER_HEALTH)[SERVER_HEALTH])
            return [] if health["status"] == 200 else None
        answers = probe(machine, plan, "/health", "/v1/models")
        health.update(answers["/health"])
        models = model_ids(answers["/v1/models"]["body"]) if answers["/v1/models"]["status"] == 200 else []
        return models if health["status"] == 200 and models else None

    models = poll(ready, timeout_s)
    if models is None:
        raise FxError(f"{machine.name}: {plan.unit} not ready after {timeout_s:.0f} s (/health: "
                      f"{health.get('status') or health.get('body')}); last lines:\n"
                      f"{log_tail(machine, plan)}", "raise --ready-timeout, or see fxctl serve logs")
    return models


def confirm_tier(machine, plan: InstancePlan) -> str:
    """Evidence that fxctl's tier really came up (LMCache only logs plugin failures)."""
    if plan.role == Role.ROUTER:
        from fxctl.serve.router import describe
        return describe(plan)
    if plan.engine == "sim":
        metrics = probe(machine, plan, "/metrics")["/metrics"]["body"]
        listing = machine.run(sh("ls", "-A", plan.data_dir)).stdout.split()
        if 'fxctl_tier_chunks{tier="l2"}' not in metrics or not listing:
            raise FxError(f"{machine.name}: {plan.unit} serves, but its real tier at {plan.data_dir} is not in use",
                          "see fxctl serve logs; the emulator must run with --real-tier")
        return f"real tier store at {plan.data_dir} ({len(listing)} entries), tier stats on /metrics"
    if plan.offload == "none":
        return "no KV offload: vLLM recomputes what its own cache lost"
    if plan.is_server and plan.offload in LMCACHE_ADAPTER_OF:   # LMCache's own adapter, a comparison anchor
        kind = LMCACHE_ADAPTER_OF[plan.offload]
        adapters = probe(machine, plan, SERVER_ADAPTERS)[SERVER_ADAPTERS]["body"]
        if f'"{kind}"' not in adapters:
            raise FxError(f"{machine.name}: {plan.unit} answers, but LMCache's {kind} is not its L2 adapter "
                          f"(adapters: {adapters[:160]})", f"see {plan.log_path}")
        return f"LMCache's own {kind} L2 adapter at {plan.data_dir} (a comparison anchor; no fxctl tier metrics)"
    if plan.is_server:   # LMCache lists a plugin adapter only as "plugin": fxctl's adapter answers on its own port
        adapters = probe(machine, plan, SERVER_ADAPTERS)[SERVER_ADAPTERS]["body"]
        tier = tier_metrics(machine, plan)
        if '"plugin"' not in adapters or tier is None or "l2" not in tier:
            seen = "none" if tier is None else "no L2"
            raise FxError(f"{machine.name}: {plan.unit} answers, but fxctl's tier is not its L2 adapter (adapters: "
                          f"{adapters[:160]}; tier metrics on port {plan.metrics_port}: {seen})",
                          f"see {plan.log_path}")
        return (f"fxctl's tier is the LMCache server's L2 adapter at {plan.data_dir} (its metrics: "
                f"http://127.0.0.1:{plan.metrics_port}/metrics)")
    if plan.config_path is None:   # MP mode: the tier lives in the host's server
        return f"LMCacheMPConnector -> fxctl-lmcache-{plan.deployment} (fxctl's tier at {plan.data_dir})"
    pattern, what = ((LMCACHE_DISK_LINE, "LMCache's LocalDiskBackend") if plan.offload == "lmcache-disk"
                     else (LOADED_LINE.pattern, "fxctl's tier plugin"))
    found = machine.run(sh("grep", "-m", "2", "-E", pattern, plan.log_path))
    if not found.ok:
        raise FxError(f"{machine.name}: {plan.unit} serves, but its log has no line saying {what} "
                      "loaded (LMCache only logs plugin failures)", "check that fxctl imports in the serving "
                      "python env (fxctl serve start runs pre-flight) and the log's LMCache warnings")
    words = TIER_LOG_WORDS.search(found.stdout)
    return f"{what} loaded (LMCache's log: {words.group(0) if words else found.stdout.strip()[-120:]})"


def stop_instance(machine, plan: InstancePlan, mode: str) -> bool:
    """Stop the unit or process group; True when it was running. FxError if anything is left."""
    was_running = instance_alive(machine, plan, mode)
    if mode == "systemd":
        machine.run(sh("systemctl", "stop", plan.unit), timeout=STOP_WAIT_S + 15)
        machine.run(sh("systemctl", "reset-failed", plan.unit).quiet_errors().or_else(sh("true")))
        if instance_alive(machine, plan, mode):
            raise FxError(f"{machine.name}: {plan.unit} is still active after systemctl stop",
                          f"systemctl status {plan.unit}")
        return was_running
    pid = read_pid(machine, plan)
    if pid is None:
        return False
    for signal in ("TERM", "KILL"):
        if not group_members(machine, pid):
            break
        machine.run(sh("kill", f"-{signal}", f"-{pid}"))  # dash and bash both take -SIG -PGID
        until(lambda: not group_members(machine, pid), STOP_WAIT_S if signal == "TERM" else 5, every_s=0.3)
    left = group_members(machine, pid)
    if left:
        raise FxError(f"{machine.name}: processes {left} of {plan.unit} survived SIGKILL", "inspect them with ps")
    machine.run(sh("rm", "-f", pidfile_of(plan)))
    return was_running


def instance_status(machine, plan: InstancePlan, mode: str) -> InstanceStatus:
    running = instance_alive(machine, plan, mode)
    pid = (unit_main_pid(machine, plan) if mode == "systemd" else read_pid(machine, plan)) if running else None
    models: list[str] = []
    healthy = False
    if running and plan.is_server:
        healthy = probe(machine, plan, SERVER_HEALTH)[SERVER_HEALTH]["status"] == 200
        return InstanceStatus(machine.name, plan.deployment, plan.index, plan.engine, plan.role, mode, plan.unit, pid,
                              running, healthy, [], plan.port, plan.log_path, tier_metrics(machine, plan))
    load = None
    if running:
        answers = probe(machine, plan, "/health", "/v1/models")
        healthy = answers["/health"]["status"] == 200
        models = model_ids(answers["/v1/models"]["body"])
        load = served_counters(machine, plan)
    return InstanceStatus(machine.name, plan.deployment, plan.index, plan.engine, plan.role, mode, plan.unit, pid,
                          running, healthy and bool(models), models, plan.port,
                          plan.log_path, load=load)


def served_counters(machine, plan: InstancePlan) -> dict | None:
    """What an engine served (vLLM's /metrics) or how the router spread requests (its metrics port)."""
    from fxctl.serve.replica_metrics import engine_counters, router_counters

    port = plan.metrics_port if plan.role == Role.ROUTER else plan.port
    answer = probe(machine, plan, "/metrics", port=port)["/metrics"]
    if answer["status"] != 200:
        return None
    return {"workers": router_counters(answer["body"])} if plan.role == Role.ROUTER else engine_counters(answer["body"])


def saved_plans(machine, state_dir: str, name: str | None = None) -> list[tuple[InstancePlan, str]]:
    """The instances recorded on the machine (all deployments, or one), with their launch mode."""
    from fxctl.errors import BadInput
    from fxctl.serve.settings import NAME_RE, PATH_RE

    if not PATH_RE.fullmatch(state_dir) or (name is not None and not NAME_RE.fullmatch(name)):
        raise BadInput(f"state dir {state_dir!r} or name {name!r} is not valid",
                       "names: lowercase letters, digits, '-'; state dir: an absolute path of [A-Za-z0-9._/+-]")
    # the pattern is expanded by the shell on purpose; both parts are checked above
    pattern = f"{state_dir}/{name}/*/instance.json" if name else f"{state_dir}/*/*/instance.json"
    body = 'for f in $1; do [ -f "$f" ] && printf "%s\\n" "$f" && cat "$f" && printf "\\036"; done; true'
    res = machine.run(script(body, pattern))
    found = []
    for chunk in res.stdout.split("\036"):
        if chunk.strip():
            path, _, text = chunk.lstrip("\n").partition("\n")
            found.append(read_state(machine.name, path, text))
    return sorted(found, key=lambda item: (item[0].deployment, LISTING[item[0].role], item[0].index))


def read_state(host: str, path: str, text: str) -> tuple[InstancePlan, str]:
    """One instance.json: its plan and launch mode. A file that does not parse stops the command, named: an
    instance skipped in silence would be left running by stop and missing from status."""
    try:
        data = json.loads(text)
        schema = data.get("schema", 1)   # fxctl before schema 1 wrote none; its files are schema 1
        if not isinstance(schema, int) or schema > STATE_SCHEMA:
            raise FxError(f"{host}: {path} has state schema {schema!r}; this fxctl reads up to {STATE_SCHEMA}",
                          "run the fxctl that started it (a newer one), or upgrade this one")
        return InstancePlan.from_dict(data["plan"]), data["mode"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FxError(f"{host}: {path} is not an instance state fxctl can read ({type(exc).__name__}: {exc})",
                      "see what runs there (the pid file beside it, or its fxctl-* systemd unit), stop it by "
                      "hand, then remove the file") from None
