"""`fxctl serve`'s settings: one ServeSettings per deployment, resolved from profile + inventory + command
line (settings_from), every value that reaches a command line checked (validate). render.py turns them into
per-instance plans.

A profile (profiles/*.yaml) gives the per-instance layout and sizes; the inventory's `serve` section and
the command line override them. Sizes from a profile are per instance; `l1_size`/`l2_size` from the
inventory or the command line are per host and split evenly between the host's instances.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fxctl.errors import BadInput
from fxctl.kvtier.admission import DEFAULT_ADMISSION
from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.serve.listen import LOOPBACK, METRICS_ADDRESSES
from fxctl.serve.lmcache_mode import MODES
from fxctl.serve.router_settings import RouterSettings
from fxctl.serve.router_settings import resolve as resolve_router
from fxctl.serve.vllm_flags import INT_RANGES, KV_CACHE_DTYPE_RE, VLLM_FLAGS
from fxctl.units import GB

ENGINES = ("vllm", "sim")
DEVICES = ("cuda", "rocm", "ascend", "cpu", "none")   # what runs vLLM on a host; "none": unknown GPU
# KV below the engine: fxctl's tier; LMCache's own tiers as comparison anchors (its in-process LocalDiskBackend,
# and the L2 adapters of its MP server that find their data after a restart: fs_native, fs, raw_block,
# integrations/lmcache/server.LMCACHE_ADAPTERS); or recompute
OFFLOADS = ("fxctl", "lmcache-fs-native", "lmcache-fs", "lmcache-raw-block", "lmcache-disk", "none")
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
    offload: str = "fxctl"              # one of OFFLOADS
    max_model_len: int | None = None    # the vLLM settings below reach its argv when set (serve.vllm_flags);
    max_num_batched_tokens: int | None = None  # max_model_len is required on CPU hosts
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    num_gpu_blocks: int | None = None
    enforce_eager: bool | None = None   # vLLM without torch.compile (cpu-tiny: its start-up is 40-60 s shorter)
    cpu_kv_cache_gb: float | None = None  # CPU hosts: vLLM's KV cache in host memory (VLLM_CPU_KVCACHE_SPACE)
    dev_endpoints: bool = False         # VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache): benchmarks only
    lmcache_mode: str | None = None     # mp | in-process; None: mp where it can serve (fxctl.serve.lmcache_mode)
    chunk_size: int = CHUNK_TOKENS
    kv_chunk_bytes: int = 0             # one chunk's KV on one rank (the profile's model; raw_block's slot size)
    l2_admission: str = DEFAULT_ADMISSION  # fxctl's L2 write admission (profile tiers.l2_admission)
    state_dir: str = REMOTE_STATE       # where configs, logs and state files go on the host
    time_scale: float = DEFAULT_SIM_TIME_SCALE
    site_dir: str | None = None         # sim on a host without pip: fxctl + deps unpacked here (PYTHONPATH)
    engine_command: tuple[str, ...] = ()  # tests only: replaces the engine argv (e.g. a command that exits)
    pipeline_parallel: int = 1          # > 1: one model over that many hosts, Ray as vLLM's executor
    router: RouterSettings = RouterSettings()   # vllm-router in front of the replicas (fxctl.serve.router)
    metrics_address: str = LOOPBACK     # where the tier's and the router's metrics listen (fxctl.serve.listen)

    @property
    def l1_bytes_per_host(self) -> int:
        """The host's DRAM pool: what --l1-size / serve.l1_size say (MP mode: the LMCache server's L1)."""
        return self.l1_bytes_per_instance * self.instances

    @property
    def l2_bytes_per_host(self) -> int:
        """The host's L2: what --l2-size / serve.l2_size say (MP mode: the LMCache server's L2 capacity)."""
        return self.l2_bytes_per_instance * self.instances

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel * self.instances if self.engine == "vllm" and self.device != "cpu" else 0


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
    problems += vllm_setting_problems(settings)
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
    if settings.metrics_address not in METRICS_ADDRESSES:
        problems.append(f"metrics_address {settings.metrics_address!r}: one of {', '.join(METRICS_ADDRESSES)}")
    if settings.pipeline_parallel > 1 and (settings.engine != "vllm" or settings.instances != 1
                                           or settings.offload != "none"):
        problems.append(f"pipeline_parallel {settings.pipeline_parallel} (one model across hosts over Ray) needs "
                        f"engine vllm, 1 instance and offload none (KV offload is not wired through Ray's stages "
                        f"yet); got {settings.engine}, {settings.instances}, {settings.offload}")
    if problems:
        raise BadInput("serve settings: " + "; ".join(problems), "fix the inventory's serve section or the option")
    return settings


def vllm_setting_problems(settings: ServeSettings) -> list[str]:
    """The optional vLLM settings (serve.vllm_flags), each within what vLLM's parser and engine accept."""
    problems = []
    for label, (low, high) in INT_RANGES.items():
        value = getattr(settings, label)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
            problems.append(f"{label} {value!r}: an integer from {low} to {high}")
    util = settings.gpu_memory_utilization
    if util is not None and (isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1):
        problems.append(f"gpu_memory_utilization {util!r}: a fraction in (0, 1]")
    if settings.enforce_eager is not None and not isinstance(settings.enforce_eager, bool):
        problems.append(f"enforce_eager {settings.enforce_eager!r}: true or false")
    dtype = settings.kv_cache_dtype
    if dtype is not None and not (isinstance(dtype, str) and re.fullmatch(KV_CACHE_DTYPE_RE, dtype)):
        problems.append(f"kv_cache_dtype {dtype!r}: a name of vLLM's --kv-cache-dtype, such as auto or fp8")
    return problems


def vllm_settings_of(loaded, spec: dict, given: dict) -> dict:
    """The table's optional vLLM settings: the profile's value, then the inventory's, then the option's."""
    found = {}
    for entry in VLLM_FLAGS:
        if entry.setting in ("tensor_parallel", "max_num_seqs"):   # required settings, resolved with the layout
            continue
        section, key = entry.profile_key.split(".", 1)
        found[entry.setting] = given.get(entry.setting, spec.get(entry.setting, loaded.get(section, key)))
    return found


def kv_chunk_bytes(loaded, tensor_parallel: int) -> int:
    """One LMCache chunk of the profile's model on one TP rank (vLLM's per-rank KV, fxctl.plan.kv); 0 when
    the profile has no model shape (the fixed-delay emulator) or a KV dtype fxctl does not know."""
    if loaded.cost_model != "roofline" or not loaded.get("model", "layers"):
        return 0
    from fxctl.plan.kv import kv_layout
    from fxctl.plan.shape import from_profile, kv_dtype_of

    try:
        per_token = kv_layout(from_profile(loaded), kv_dtype_of(loaded), int(tensor_parallel or 1)).per_gpu_bytes
    except BadInput:   # a KV dtype fxctl does not size (the host's vLLM judges it in pre-flight): unknown here
        return 0
    return int(loaded.get("tiers", "chunk_tokens", CHUNK_TOKENS)) * per_token


def settings_from(loaded, serve_spec=None, **overrides) -> ServeSettings:
    """Resolve settings: the loaded profile, then what the inventory's serve section set, then non-None
    `overrides` (each layer wins over the one before only where it set a value).

    overrides: name, engine, model, tensor_parallel, pipeline_parallel, instances, port, max_num_seqs, l1_bytes
    (per host), l2_bytes (per host), l2_dir, python, state_dir, time_scale, site_dir, engine_command, offload,
    lmcache_mode, router_mode, router_policy, router_port (the inventory's serve.router: policy, port, host),
    metrics_address,
    and vLLM's optional settings of serve.vllm_flags (max_model_len, max_num_batched_tokens, ...).
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
        **vllm_settings_of(loaded, spec, given),
        cpu_kv_cache_gb=loaded.get("serving", "cpu_kv_cache_gb") if device == "cpu" else None,
        chunk_size=loaded.get("tiers", "chunk_tokens", CHUNK_TOKENS),
        kv_chunk_bytes=kv_chunk_bytes(loaded, pick("tensor_parallel", loaded.get("serving", "tensor_parallel", 1))),
        l2_admission=loaded.get("tiers", "l2_admission", DEFAULT_ADMISSION),
        state_dir=given.get("state_dir", REMOTE_STATE),
        time_scale=given.get("time_scale", DEFAULT_SIM_TIME_SCALE), site_dir=given.get("site_dir"),
        engine_command=tuple(given.get("engine_command", ())), metrics_address=pick("metrics_address", LOOPBACK),
        router=resolve_router(loaded.get("serving", "router.policy"), spec.get("router"), given))
    return validate(settings)


def with_site_dir(settings: ServeSettings, site_dir: str | None) -> ServeSettings:
    return validate(replace(settings, site_dir=site_dir))
