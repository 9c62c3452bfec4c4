"""Putting this fxctl into a serving host's python env, when pre-flight found it missing or stale: plan what
goes where, apply (upload, install or unpack), verify (the env's facts read again report this fxctl's source
hash). Under `start --check` only the plan is said (a "pending" check); nothing is uploaded or unpacked.

vLLM envs have pip: fxctl's wheel is installed there (no deps, no index: the host may have no network).
Emulator hosts may have neither pip nor network: the wheels are unpacked into private site folders, fxctl's
own (replaced whenever it changes) in front of its dependencies (unpacked once per set of wheels).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxctl.engine.apply import Status
from fxctl.engine.fact import gather_facts
from fxctl.facts.files import FileContent
from fxctl.facts.serving import FreeSpace, PythonEnv, PythonPlatform
from fxctl.remote.command import script, sh
from fxctl.serve import wheel
from fxctl.serve.settings import ServeSettings

PIP_TIMEOUT_S = 300
PYTHON_TIMEOUT_S = 120   # reading a serving env imports vllm and lmcache: seconds on a busy host
UNPACK = ('py=$1; dest=$2; shift 2; rm -rf "$dest.new" && mkdir -p "$dest.new" || exit 1; '
          'for w in "$@"; do "$py" -m zipfile -e "$w" "$dest.new/" || exit 1; done; '
          'rm -rf "$dest" && mv "$dest.new" "$dest"')
# What unpacking needs on the host, as a multiple of the wheels' bytes: the wheels themselves in the staging
# folder and the unpacked copy (about 3.5 times the wheels for fxctl's dependencies: 17 MB -> 60 MB), with
# the old copy still there until the new one is complete when only fxctl's own changes
UNPACK_ROOM = 5


@dataclass
class Stale:
    """Pre-flight's finding: the env lacks this fxctl (`why`), which `built` (source hash `expected`) fixes."""

    why: str
    built: Path
    expected: str
    modules: tuple[str, ...]


def is_current(env: dict, expected: str) -> bool:
    return env.get("fxctl_hash") == expected and not env.get("missing")


def install_fxctl(machine, settings: ServeSettings, result, stale: Stale, *, plan: bool) -> None:
    """Into the engine's env (vllm) or private site folders (sim); adds the "fxctl" check to `result`."""
    if settings.engine == "vllm":
        install_into_env(machine, settings, result, stale, plan=plan)
    else:
        install_site(machine, settings, result, stale, plan=plan)


def install_into_env(machine, settings: ServeSettings, result, stale: Stale, *, plan: bool) -> None:
    built = stale.built
    remote = f"{settings.state_dir}/wheels/{built.name}"
    if plan:
        result.add("fxctl", Status.PENDING, f"{settings.python}: {stale.why}; start would upload {built.name} to "
                   f"{remote} and pip install it there (no deps, no index)")
        return
    machine.upload(built, remote)
    res = machine.run(sh(settings.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--force-reinstall", remote), timeout=PIP_TIMEOUT_S)
    env = read_env(machine, settings.python, ("fxctl.integrations.lmcache.storage_plugin",))
    if res.ok and is_current(env, stale.expected):
        result.add("fxctl", Status.CHANGED, f"was {stale.why}; installed {built.name} into {settings.python}")
    else:
        result.add("fxctl", Status.FAILED, f"installing {built.name} into {settings.python} failed: "
                   f"{res.tail(3) or '; '.join(env.get('missing', [])) or 'installed fxctl differs'}",
                   f"{settings.python} -m pip install {remote} (its dependencies must be there)")


def read_env(machine, python: str, modules: tuple[str, ...], site_dir: str | None = None) -> dict:
    return gather_facts(machine, {"env": PythonEnv(python, modules, site_dir)}, timeout=PYTHON_TIMEOUT_S)["env"]


def install_site(machine, settings: ServeSettings, result, stale: Stale, *, plan: bool) -> None:
    own, deps = f"{settings.state_dir}/site-fxctl", f"{settings.state_dir}/site"
    path = f"{own}:{deps}"
    stamp = f"{deps}/.fxctl-wheelhouse"
    facts = gather_facts(machine, {"env": PythonEnv(settings.python, stale.modules, path),
                                   "platform": PythonPlatform(settings.python), "stamp": FileContent(stamp),
                                   "room": FreeSpace(settings.state_dir)}, timeout=PYTHON_TIMEOUT_S)
    if is_current(facts["env"], stale.expected):
        result.site_dir = path
        result.add("fxctl", Status.OK, f"fxctl + aiohttp on PYTHONPATH {path} are this checkout")
        return
    platform = facts["platform"]
    if "error" in platform:
        result.add("fxctl", Status.FAILED, f"cannot read the python version: {platform['error']}",
                   "check serve.python")
        return
    wheels = [w for w in wheel.dependency_wheels(platform["version"], platform["machine"])
              if not w.name.startswith("fxctl-")]
    wanted = " ".join(sorted(w.name for w in wheels))
    fresh_deps = (facts["stamp"] or "").strip() != wanted
    pushed = ([*wheels] if fresh_deps else []) + [stale.built]
    if not room_for_wheels(settings.state_dir, facts["room"], pushed, result):
        return
    if plan:
        result.add("fxctl", Status.PENDING, f"{stale.why}; start would upload and unpack {stale.built.name}" + (
            f" and {len(wheels)} dependency wheels" if fresh_deps else "") + f" into {path}")
        return
    staging = f"{settings.state_dir}/wheelhouse"
    steps = []
    if fresh_deps:
        machine.run(sh("rm", "-rf", staging).then(sh("mkdir", "-p", staging)), check=True)
        for item in wheels:
            machine.upload(item, f"{staging}/{item.name}")
        steps.append(machine.run(script(UNPACK, settings.python, deps, *[f"{staging}/{w.name}" for w in wheels]),
                                 timeout=PIP_TIMEOUT_S))
        if steps[-1].ok:
            machine.write_text(stamp, wanted + "\n")
    machine.upload(stale.built, f"{staging}/{stale.built.name}")
    steps.append(machine.run(script(UNPACK, settings.python, own, f"{staging}/{stale.built.name}"), timeout=120))
    machine.run(sh("rm", "-rf", staging))   # unpacked: the wheels are not needed there any more
    env = read_env(machine, settings.python, stale.modules, path)
    failed = [s for s in steps if not s.ok]
    if not failed and is_current(env, stale.expected):
        result.site_dir = path
        result.add("fxctl", Status.CHANGED, f"was {stale.why}; unpacked {stale.built.name}" + (
            f" and {len(wheels)} dependency wheels (aiohttp, ...)" if fresh_deps else "") + f" into {path}")
    else:
        detail = failed[0].tail(3) if failed else "; ".join(env.get("missing", [])) or "fxctl there differs"
        result.add("fxctl", Status.FAILED, f"unpacking wheels into {path} failed: {detail}",
                   f"install fxctl[sim] into {settings.python} yourself")


def room_for_wheels(state_dir: str, room: dict, wheels: list[Path], result) -> bool:
    """Whether the filesystem of state_dir (`room`: its FreeSpace fact) has room to stage and unpack these
    wheels; a failed check when not, before anything is uploaded (a full root filesystem otherwise fails
    mid-upload, cryptically)."""
    need = UNPACK_ROOM * sum(w.stat().st_size for w in wheels)
    if "error" in room:
        result.add("state-space", Status.FAILED, f"df on {room['parent']} failed: {room['error']}",
                   "check serve.state_dir")
        return False
    if room["free"] < need:
        result.add("state-space", Status.FAILED, f"{state_dir}: {room['free'] / 1e6:.0f} MB free on "
                   f"{room['parent']}, unpacking {len(wheels)} wheels needs about {need / 1e6:.0f} MB",
                   "free space there, or set serve.state_dir to a folder on a larger filesystem")
        return False
    return True
