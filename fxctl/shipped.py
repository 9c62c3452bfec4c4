"""What ships inside the package: emulator/serving profiles and playbooks, read with importlib.resources.

The top-level `profiles/` and `playbooks/` of the repository are the source; `fxctl/data/profiles` and
`fxctl/data/playbooks` link to them, so an editable install reads the checkout and a wheel (`pip install .`)
carries copies as package data. A name resolves to a shipped file; anything that names a file is used as is.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fxctl.errors import BadInput

KINDS = ("profiles", "playbooks")


def shipped_dir(kind: str) -> Path:
    """The folder of one kind inside the installed package (a real folder: fxctl is never run zipped)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of shipped data: {kind}")
    return Path(str(resources.files("fxctl.data") / kind))


def shipped_names(kind: str) -> list[str]:
    """Names of the shipped files of one kind (file names without .yaml), sorted."""
    folder = shipped_dir(kind)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def shipped_path(kind: str, name: str) -> Path | None:
    """The shipped file NAME (with or without .yaml), or None."""
    path = shipped_dir(kind) / f"{name.removesuffix('.yaml')}.yaml"
    return path if "/" not in name and path.is_file() else None


def resolve(kind: str, name_or_path: str) -> Path:
    """A YAML file given by path, else the shipped file of that name; BadInput naming what ships."""
    path = Path(name_or_path)
    if path.is_file() and (path.suffix in (".yaml", ".yml") or shipped_path(kind, name_or_path) is None):
        return path
    found = shipped_path(kind, name_or_path)
    if found is not None:
        return found
    known = ", ".join(shipped_names(kind)) or "none"
    singular = kind.removesuffix("s")
    raise BadInput(f"no such {singular}: {name_or_path}", f"give a YAML path or one of the shipped {kind}: {known}")


def profile_path(name_or_path: str) -> Path:
    """A profile: a YAML path as given, or a shipped profile's name (`fxctl profiles list`)."""
    return resolve("profiles", name_or_path)


def playbook_path(name_or_path: str) -> Path:
    """A playbook: a file as given, or a shipped playbook's name."""
    return resolve("playbooks", name_or_path)
