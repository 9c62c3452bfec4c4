"""fxctl's own wheel (and, for hosts without network or pip, its dependencies) for the serving hosts.

The tier backend ships with the toolkit, so the serving python env must hold the same fxctl as the one
running here. Freshness is a hash of the package's source files, computed the same way here and on the host
(fxctl.facts.serving.SOURCE_HASH runs there with the host's python), so a stale install is found whatever
its version says.

fxctl ships itself from wherever it runs: from a checkout (or an editable install of one) `pip wheel` builds
the wheel from the source tree; from an installed wheel (site-packages, no pyproject.toml) the wheel is
packed again from the installed files and the distribution's own metadata (METADATA, entry points),
with a fresh RECORD. Either way the wheel holds exactly the package that is running.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from fxctl.errors import FxError

PACKAGE = Path(__file__).resolve().parents[1]   # the fxctl package that is running
IMPORT_ROOT = PACKAGE.parent                      # where it imports from: a checkout, or site-packages
SUFFIXES = (".py",)
# files pip writes at install time: not part of the wheel packed from an installed fxctl
INSTALL_TIME_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


@functools.cache
def checkout() -> Path | None:
    """The source tree fxctl runs from (a clone, or an editable install of one); None for an installed wheel."""
    pyproject = IMPORT_ROOT / "pyproject.toml"
    if pyproject.is_file() and re.search(r'(?m)^name\s*=\s*"fxctl"', pyproject.read_text()):
        return IMPORT_ROOT
    return None


def local_source_hash() -> str:
    h = hashlib.sha256()
    for directory, _subdirs, files in sorted((d, s, f) for d, s, f in _walk(PACKAGE)):
        for name in sorted(files):
            if name.endswith(SUFFIXES):
                path = Path(directory) / name
                h.update(str(path.relative_to(PACKAGE)).encode() + b"\0")
                h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def wheel_source_hash(wheel_path: Path) -> str:
    """The source hash of the fxctl package inside a wheel: what fxctl.facts.serving.SOURCE_HASH reports on
    the host once it is installed."""
    import zipfile

    h = hashlib.sha256()
    with zipfile.ZipFile(wheel_path) as zf:
        names = [n for n in zf.namelist() if n.startswith("fxctl/") and n.endswith(SUFFIXES)]
        entries = {n[len("fxctl/"):]: zf.read(n) for n in names}
    # same order as os.walk sorted by directory, then files sorted within each directory
    by_dir: dict[str, list[str]] = {}
    for rel in entries:
        by_dir.setdefault(rel.rsplit("/", 1)[0] if "/" in rel else "", []).append(rel)
    for directory in sorted(by_dir, key=lambda d: str(Path("/r") / d) if d else "/r"):
        for rel in sorted(by_dir[directory], key=lambda r: r.rsplit("/", 1)[-1]):
            h.update(rel.encode() + b"\0")
            h.update(entries[rel] + b"\0")
    return h.hexdigest()


def _walk(root: Path):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs if s != "__pycache__")
        yield directory, subdirs, files


def cache_dir() -> Path:
    from fxctl.paths import serve_cache_dir

    return serve_cache_dir()


def build_key() -> str:
    """Every file the wheel carries (sources and the shipped profiles and playbooks, links followed)."""
    h = hashlib.sha256()
    for directory, subdirs, files in sorted(os.walk(PACKAGE, followlinks=True)):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(f for f in files if not f.endswith(".pyc")):
            path = Path(directory) / name
            h.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_wheel() -> Path:
    """fxctl's wheel, built once per content (a folder named by build_key): from the checkout with
    `pip wheel --no-deps`, or packed from the installed distribution."""
    out = cache_dir() / "wheels" / build_key()[:16]
    found = sorted(out.glob("fxctl-*.whl"))
    if found:
        return found[0]
    out.mkdir(parents=True, exist_ok=True)
    source = checkout()
    return pip_wheel(source, out) if source else pack_installed(out)


def pip_wheel(repo: Path, out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:  # a clean copy: no stale build/ in the checkout leaks in
        source = Path(tmp) / "src"
        shutil.copytree(PACKAGE, source / "fxctl", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (repo / name).exists():
                shutil.copy(repo / name, source / name)
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "-q", "-w", str(out), str(source)], capture_output=True, text=True)
    found = sorted(out.glob("fxctl-*.whl"))
    if done.returncode != 0 or not found:
        raise FxError(f"pip wheel of {repo} failed: {(done.stderr or done.stdout).strip()[-500:]}",
                      "run `pip wheel --no-deps .` in the repository to see why")
    return found[0]


def installed_distribution():
    """The installed fxctl distribution whose files are the running package (FxError otherwise)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("fxctl")
    except PackageNotFoundError:
        dist = None
    if dist is None or Path(dist.locate_file("fxctl/__init__.py")).resolve() != PACKAGE / "__init__.py":
        raise FxError(f"fxctl at {PACKAGE} is neither a checkout nor an installed distribution: its wheel "
                      "cannot be built", "install fxctl with pip (a wheel or an index), or run it from a clone")
    return dist


def _record_line(name: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(content)}"


def pack_installed(out: Path) -> Path:
    """A wheel of the installed fxctl: its package files as installed, its dist-info from the distribution
    (install-time files left out), a RECORD written for them. Pure Python, so the tag is py3-none-any."""
    dist = installed_distribution()
    version = dist.version
    info = f"fxctl-{version}.dist-info"
    entries: list[tuple[str, bytes]] = []
    for directory, _subdirs, files in _walk(PACKAGE):
        for name in sorted(files):
            if not name.endswith(".pyc"):
                path = Path(directory) / name
                entries.append((f"fxctl/{path.relative_to(PACKAGE).as_posix()}", path.read_bytes()))
    for file in dist.files or []:
        if file.parts[0].endswith(".dist-info") and file.name not in INSTALL_TIME_FILES and \
                "__pycache__" not in file.parts:
            entries.append((f"{info}/{'/'.join(file.parts[1:])}", Path(dist.locate_file(file)).read_bytes()))
    if not any(name == f"{info}/METADATA" for name, _ in entries):
        raise FxError(f"the installed fxctl {version} has no METADATA", "reinstall fxctl with pip")
    record = [_record_line(name, content) for name, content in entries] + [f"{info}/RECORD,,"]
    target = out / f"fxctl-{version}-py3-none-any.whl"
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in entries:
            zf.writestr(name, content)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    os.replace(partial, target)
    return target


def dependency_key() -> str:
    """What fxctl depends on: the checkout's pyproject.toml, or the installed distribution's requirements."""
    source = checkout()
    if source:
        text = (source / "pyproject.toml").read_bytes()
    else:
        text = "\n".join(installed_distribution().requires or []).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def dependency_wheels(python_version: str, machine: str, extras: str = "sim") -> list[Path]:
    """fxctl's dependencies (with `extras`) as binary wheels for the host's python (downloaded once).

    For hosts without network or pip: they are unpacked into a private site directory there.
    """
    if machine not in ("x86_64", "aarch64"):
        raise FxError(f"no wheels for machine {machine!r}", "install fxctl's dependencies on the host yourself")
    wheel = build_wheel()
    deps_key = dependency_key()
    out = cache_dir() / f"wheelhouse-cp{python_version.replace('.', '')}-{machine}-{deps_key}"
    marker = out / ".complete"
    if not marker.exists():
        out.mkdir(parents=True, exist_ok=True)
        platforms = [f"manylinux2014_{machine}", f"manylinux_2_28_{machine}", f"manylinux_2_17_{machine}"]
        argv = [sys.executable, "-m", "pip", "download", "-q", "-d", str(out), "--only-binary=:all:",
                "--python-version", python_version, "--implementation", "cp"]
        for platform in platforms:
            argv += ["--platform", platform]
        done = subprocess.run(argv + [f"fxctl[{extras}] @ {wheel.as_uri()}"], capture_output=True, text=True)
        if done.returncode != 0:
            raise FxError(f"pip download of fxctl's dependencies for python {python_version} {machine} failed: "
                          f"{(done.stderr or done.stdout).strip()[-500:]}",
                          "this machine needs network access to PyPI (or a pip index) to fetch them once")
        marker.write_text("ok\n")
    return sorted(out.glob("*.whl"))
