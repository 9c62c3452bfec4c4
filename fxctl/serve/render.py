"""What `fxctl serve` runs, as data: per instance its GPU set, port, environment, argv and LMCache config.

A profile (profiles/*.yaml) gives the per-instance layout and sizes; the inventory's `serve` section and
the command line override them. Sizes from a profile are per instance; `l1_size`/`l2_size` from the
inventory or the command line are per host and split evenly between the host's instances.
Nothing here runs anything: `--dry-run` prints these plans, `launch` executes them.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace

import yaml

from fxctl.errors import BadInput
from fxctl.kvtier.admission import DEFAULT_ADMISSION
from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.kvtier.lmcache_config import lmcache_environment, render_lmcache_config
from fxctl.serve.lmcache_mode import (
    MODES,
    SERVER_INDEX,
    lmcache_mode,
    mp_kv_transfer_config,
    mp_ports,
    server_argv,
    server_environment,
)
from fxctl.serve.router_settings import RouterSettings
from fxctl.serve.router_settings import resolve as resolve_router
from fxctl.units import GB, GIB

ENGINES = ("vllm", "sim")
DEVICES = ("cuda", "rocm", "ascend", "cpu", "none")   # what runs vLLM on a host; "none": unknown GPU
OFFLOADS = ("fxctl", "lmcache-disk", "none")           # KV below the engine: fxctl's tier, LMCache's own
                                                      # disk tier (a comparison anchor), or recompute
KV_TRANSFER_CONFIG = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
                                separators=(",", ":"))
# vLLM on CPU: LMCache has no connector for vLLM's CPU cache; fxctl's (fxctl.kvtier.vllm_cpu_connector) wraps
# vLLM's LMCacheConnectorV1 with one
CPU_KV_TRANSFER_CONFIG = json.dumps({"kv_connector": "FxCpuLMCacheConnector",
                                     "kv_connector_module_path": "fxctl.kvtier.vllm_cpu_connector",
                                     "kv_role": "kv_both"}, separators=(",", ":"))
# the `vllm serve` console script fails with the vllm-cpu distribution (it asks version("vllm")); the
# module entry point works with both distributions
VLLM_CPU_ENTRY = ("-m", "vllm.entrypoints.openai.api_server")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,199}$")
PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]{0,250}$")
REMOTE_STATE = "/var/lib/fxctl/serve"
DEFAULT_SIM_TIME_SCALE = 1.0


@dataclass(frozen=True)
class ServeSettings:
    """Everything a deployment needs, resolved from profile + inventory + command line."""

    name: str
    profile: str
    engine: str
    model: str
    tensor_parallel: int
    instances: int
    port: int
    max_num_seqs: int
    l1_bytes_per_instance: int
    l2_bytes_per_instance: int
    l2_dir: str
    python: str = "python3"
    device: str = "cuda"                # cuda | rocm | ascend | cpu | none (see DEVICES)
    offload: str = "fxctl"              # fxctl | lmcache-disk | none (see OFFLOADS)
    max_model_len: int | None = None    # passed to vLLM when set (always on CPU hosts)
    cpu_kv_cache_gb: float | None = None  # CPU hosts: vLLM's KV cache in host memory (VLLM_CPU_KVCACHE_SPACE)
    dev_endpoints: bool = False         # VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache): benchmarks only
    lmcache_mode: str | None = None     # mp | in-process; None: mp where it can serve (fxctl.serve.lmcache_mode)
    chunk_size: int = CHUNK_TOKENS
    l2_admission: str = DEFAULT_ADMISSION  # fxctl's L2 write admission (profile tiers.l2_admission)
    state_dir: str = REMOTE_STATE       # where configs, logs and state files go on the host
    time_scale: float = DEFAULT_SIM_TIME_SCALE
    site_dir: str | None = None         # sim on a host without pip: fxctl + deps unpacked here (PYTHONPATH)
    engine_command: tuple[str, ...] = ()  # tests only: replaces the engine argv (e.g. a command that exits)
    pipeline_parallel: int = 1          # > 1: one model over that many hosts, Ray as vLLM's executor
    router: RouterSettings = RouterSettings()   # vllm-router in front of the replicas (fxctl.serve.router)

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel * self.instances if self.engine == "vllm" and self.device != "cpu" else 0


@dataclass(frozen=True)
class InstancePlan:
    """One serving process on one host."""

    deployment: str
    index: int
    host: str                           # inventory host name, or "local"
    port: int
    gpus: tuple[int, ...]
    env: dict[str, str]
    argv: tuple[str, ...]
    lmcache_config: dict | None
    config_path: str | None
    log_path: str
    state_path: str
    l2_path: str
    unit: str
    engine: str
    offload: str = "fxctl"
    role: str = "engine"                # engine | lmcache-server (MP mode: the host's LMCache server)
    metrics_port: int = 0               # where fxctl's tier exports Prometheus metrics (0: none)

    @property
    def is_server(self) -> bool:
        return self.role == "lmcache-server"

    @property
    def id(self) -> str:
        return f"{self.deployment}-{self.index}"

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
                "state_path": self.state_path, "l2_path": self.l2_path, "offload": self.offload, "role": self.role,
                "metrics_port": self.metrics_port}

    @classmethod
    def from_dict(cls, data: dict) -> InstancePlan:
        return cls(deployment=data["deployment"], index=data["index"], host=data["host"], port=data["port"],
                   gpus=tuple(data["gpus"]), env=dict(data["env"]), argv=tuple(data["argv"]),
                   lmcache_config=data.get("lmcache_config"), config_path=data.get("config_path"),
                   log_path=data["log_path"], state_path=data["state_path"], l2_path=data["l2_path"],
                   unit=data["unit"], engine=data["engine"], offload=data.get("offload", "fxctl"),
                   role=data.get("role", "engine"), metrics_port=data.get("metrics_port", 0))


def device_of(loaded) -> str:
    """The profile's serving.device, or the vendor read from its GPU name."""
    return loaded.get("serving", "device") or gpu_vendor(loaded.get("gpu", "name", "") or "")


def gpu_vendor(gpu_name: str) -> str:
    name = gpu_name.lower()
    if "amd" in name or "instinct" in name or name.startswith("mi"):
        return "rocm"
    if "ascend" in name or "huawei" in name:
        return "ascend"
    if "nvidia" in name or re.search(r"\b[ahbl]\d{2,3}\b", name):
        return "cuda"
    return "none"


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


def validate(settings: ServeSettings) -> ServeSettings:
    """Every value that reaches a command line, checked; BadInput names the value and what is allowed."""
    problems = []
    if not NAME_RE.fullmatch(settings.name):
        problems.append(f"name {settings.name!r}: lowercase letters, digits and '-', at most 40")
    if settings.engine not in ENGINES:
        problems.append(f"engine {settings.engine!r}: one of {', '.join(ENGINES)}")
    if settings.device not in DEVICES:
        problems.append(f"device {settings.device!r}: one of {', '.join(DEVICES)}")
    if settings.lmcache_mode not in (None, *MODES):
        problems.append(f"lmcache_mode {settings.lmcache_mode!r}: one of {', '.join(MODES)}")
    if settings.offload not in OFFLOADS:
        problems.append(f"offload {settings.offload!r}: one of {', '.join(OFFLOADS)}")
    if settings.engine == "vllm" and settings.device == "cpu":
        if not settings.max_model_len or not 16 <= settings.max_model_len <= 1 << 21:
            problems.append(f"max_model_len {settings.max_model_len!r}: vLLM on CPU needs it, 16..2097152 "
                            "(the profile's model.max_model_len)")
        if not settings.cpu_kv_cache_gb or not 0 < settings.cpu_kv_cache_gb <= 4096:
            problems.append(f"cpu_kv_cache_gb {settings.cpu_kv_cache_gb!r}: vLLM on CPU needs it, > 0 "
                            "(the profile's serving.cpu_kv_cache_gb)")
    if not (MODEL_RE.fullmatch(settings.profile) or PATH_RE.fullmatch(settings.profile)) or ".." in settings.profile:
        problems.append(f"profile {settings.profile!r}: a name in profiles/ or an absolute YAML path")
    model = settings.model or ""
    if not (MODEL_RE.fullmatch(model) or PATH_RE.fullmatch(model)) or ".." in model:
        problems.append(f"model {settings.model!r}: a Hugging Face id or a path of [A-Za-z0-9._/:-]")
    for label, value, low, high in (("tensor_parallel", settings.tensor_parallel, 1, 64),
                                    ("pipeline_parallel", settings.pipeline_parallel, 1, 64),
                                    ("instances", settings.instances, 1, 64),
                                    ("max_num_seqs", settings.max_num_seqs, 1, 65536),
                                    ("chunk_size", settings.chunk_size, 1, 65536)):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            problems.append(f"{label} {value!r}: an integer from {low} to {high}")
    if not 1 <= settings.port <= 65535 - settings.instances + 1:
        problems.append(f"port {settings.port}: 1..65535 with room for {settings.instances} instance(s)")
    paths = [("l2_dir", settings.l2_dir), ("state_dir", settings.state_dir)]
    paths += [("site_dir", p) for p in (settings.site_dir or "/").split(":")]
    for label, path in paths:
        if not PATH_RE.fullmatch(path or "") or "/../" in f"{path}/":
            problems.append(f"{label} {path!r}: an absolute path of [A-Za-z0-9._/+-]")
    if not (PATH_RE.fullmatch(settings.python) or re.fullmatch(r"python3(\.\d+)?", settings.python)):
        problems.append(f"python {settings.python!r}: python3 or an absolute path to an interpreter")
    if settings.offload != "none" and (settings.l1_bytes_per_instance <= 0 or settings.l2_bytes_per_instance <= 0):
        problems.append("l1 and l2 sizes must be > 0 (LMCache plugins stage through the CPU pool)")
    if not settings.time_scale >= 0:
        problems.append(f"time_scale {settings.time_scale}: >= 0")
    problems += settings.router.problems()
    if settings.pipeline_parallel > 1 and (settings.engine != "vllm" or settings.instances != 1
                                           or settings.offload != "none"):
        problems.append(f"pipeline_parallel {settings.pipeline_parallel} (one model across hosts over Ray) needs "
                        f"engine vllm, 1 instance and offload none (KV offload is not wired through Ray's stages "
                        f"yet); got {settings.engine}, {settings.instances}, {settings.offload}")
    if problems:
        raise BadInput("serve settings: " + "; ".join(problems), "fix the inventory's serve section or the option")
    return settings


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
    argv += ("--port", str(port), "--tensor-parallel-size", str(settings.tensor_parallel),
             "--max-num-seqs", str(settings.max_num_seqs))
    if settings.max_model_len:
        argv += ("--max-model-len", str(settings.max_model_len))
    if settings.pipeline_parallel > 1:   # stages on the Ray cluster's nodes (fxctl.serve.ray_cluster)
        argv += ("--pipeline-parallel-size", str(settings.pipeline_parallel), "--distributed-executor-backend", "ray")
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
                                 l2_admission=settings.l2_admission)


def instance_env(settings: ServeSettings, gpus: tuple[int, ...], config_path: str | None) -> dict[str, str]:
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
        l2_path = server.l2_path if server else f"{settings.l2_dir}/{settings.name}-{index}"
        gpus = tuple(range(index * settings.tensor_parallel, (index + 1) * settings.tensor_parallel)) \
            if settings.gpus_needed else ()
        config = lmcache_config_for(settings, l2_path) if settings.engine == "vllm" else None
        config_path = f"{instance_dir}/lmcache.yaml" if config is not None else None
        plans.append(InstancePlan(
            deployment=settings.name, index=index, host=host, port=port, gpus=gpus,
            env=instance_env(settings, gpus, config_path), argv=engine_argv(settings, port, l2_path),
            lmcache_config=config, config_path=config_path, log_path=f"{instance_dir}/serve.log",
            state_path=f"{instance_dir}/instance.json", l2_path=l2_path,
            unit=f"fxctl-serve-{settings.name}-{index}", engine=settings.engine, offload=settings.offload))
    return plans


def server_plan(settings: ServeSettings, host: str) -> InstancePlan:
    """MP mode: the host's `lmcache server` with fxctl's tier as its L2 adapter (one per host and deployment)."""
    directory = f"{settings.state_dir}/{settings.name}/lmcache"
    l2_path = f"{settings.l2_dir}/{settings.name}-mp"
    env = {"PYTHONHASHSEED": "0", **server_environment(),
           **({"PYTHONPATH": settings.site_dir} if settings.site_dir else {})}
    return InstancePlan(
        deployment=settings.name, index=SERVER_INDEX, host=host, port=mp_ports(settings)[1], gpus=(), env=env,
        argv=server_argv(settings, l2_path), lmcache_config=None, config_path=None,
        log_path=f"{directory}/server.log", state_path=f"{directory}/instance.json", l2_path=l2_path,
        unit=f"fxctl-lmcache-{settings.name}", engine=settings.engine, offload=settings.offload,
        role="lmcache-server", metrics_port=mp_ports(settings)[2])


def settings_from(loaded, serve_spec=None, **overrides) -> ServeSettings:
    """Resolve settings: the loaded profile, then what the inventory's serve section set, then non-None
    `overrides` (each layer wins over the one before only where it set a value).

    overrides: name, engine, model, tensor_parallel, pipeline_parallel, instances, port, max_num_seqs, l1_bytes
    (per host), l2_bytes (per host), l2_dir, python, state_dir, time_scale, site_dir, engine_command, offload,
    lmcache_mode, router_mode, router_policy, router_port (the inventory's serve.router: policy, port, host).
    """
    spec = serve_spec.set_fields() if serve_spec is not None else {}
    given = {k: v for k, v in overrides.items() if v is not None}
    pick = lambda key, default=None: given.get(key, spec.get(key, default))  # noqa: E731
    instances = pick("instances", loaded.get("serving", "instances", 1))
    per_host_l1 = pick("l1_bytes")
    per_host_l2 = pick("l2_bytes")
    l1 = per_host_l1 // instances if per_host_l1 else int(loaded.get("tiers", "l1_size_gb", 0) * GB)
    l2 = per_host_l2 // instances if per_host_l2 else int(loaded.get("tiers", "l2_size_gb", 0) * GB)
    l2_dir = pick("l2_dir")
    if not l2_dir:
        raise BadInput("no L2 directory for the tier", "pass --l2-dir DIR (on the array's mount) or set "
                       "serve.l2_dir in the inventory")
    device = device_of(loaded)
    model = pick("model", loaded.get("model", "name"))
    settings = ServeSettings(
        name=given.get("name", "main"), profile=str(given.get("profile", loaded.name)),
        engine=pick("engine", "vllm"), model=model,
        tensor_parallel=pick("tensor_parallel", loaded.get("serving", "tensor_parallel", 1)),
        pipeline_parallel=pick("pipeline_parallel", loaded.get("serving", "pipeline_parallel", 1)),
        instances=instances, port=pick("port", 8000),
        max_num_seqs=pick("max_num_seqs", loaded.get("serving", "max_num_seqs", 256)),
        l1_bytes_per_instance=l1, l2_bytes_per_instance=l2, l2_dir=l2_dir.rstrip("/") or "/",
        python=pick("python", "python3"), device=device, offload=given.get("offload", "fxctl"),
        lmcache_mode=given.get("lmcache_mode"),
        max_model_len=loaded.get("model", "max_model_len") if device == "cpu" else None,
        cpu_kv_cache_gb=loaded.get("serving", "cpu_kv_cache_gb") if device == "cpu" else None,
        chunk_size=loaded.get("tiers", "chunk_tokens", CHUNK_TOKENS),
        l2_admission=loaded.get("tiers", "l2_admission", DEFAULT_ADMISSION),
        state_dir=given.get("state_dir", REMOTE_STATE),
        time_scale=given.get("time_scale", DEFAULT_SIM_TIME_SCALE), site_dir=given.get("site_dir"),
        engine_command=tuple(given.get("engine_command", ())),
        router=resolve_router(loaded.get("serving", "router.policy"), spec.get("router"), given))
    return validate(settings)


def with_site_dir(settings: ServeSettings, site_dir: str | None) -> ServeSettings:
    return validate(replace(settings, site_dir=site_dir))


@dataclass
class DryRun:
    """What `--dry-run` prints: per host, per instance, env + argv + LMCache YAML."""

    plans: list[InstancePlan] = field(default_factory=list)
    mode_line: str = ""            # which LMCache path, and why when it is not MP

    def text(self) -> str:
        out = []
        for plan in self.plans:
            if plan.role == "router":
                out.append(f"# {plan.host}: router ({plan.unit}), vllm-router in front of the instances, port "
                           f"{plan.port} (the endpoint), its metrics on 127.0.0.1:{plan.metrics_port}, started after "
                           f"the instances are ready, log {plan.log_path}")
            elif plan.role in ("ray-head", "ray-worker"):   # fxctl.serve.ray_cluster
                out.append(f"# {plan.host}: Ray {plan.role[4:]} node ({plan.unit}) at {plan.env.get('VLLM_HOST_IP')}, "
                           f"Ray temp dir {plan.l2_path}, log {plan.log_path}")
            elif plan.is_server:
                out.append(f"# {plan.host}: LMCache server ({plan.unit}), fxctl's tier as its L2 adapter at "
                           f"{plan.l2_path}, HTTP API port {plan.port}, log {plan.log_path}")
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
