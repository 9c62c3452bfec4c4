"""Operations on files: whole-file content and managed lines (fstab, mdadm.conf)."""

from __future__ import annotations

import posixpath

from fxctl.engine.plan import Operation
from fxctl.remote.command import sh, write_file


def ensure_file(path: str, content: str, current: str | None, mode: str = "0644") -> Operation:
    """The file holds exactly `content`."""
    if current == content:
        return f"{path} is up to date"
    yield sh("mkdir", "-p", posixpath.dirname(path))
    yield write_file(path, content, mode)
    return None


def with_managed_line(current: str | None, line: str, marker: str) -> str:
    """The text with the line tagged `marker` replaced in place by `line` (appended when there is none): other
    managed lines keep their places, so two markers in one file (an array's paths) converge."""
    tagged = f"{line}  # {marker}"
    lines = [] if current is None else current.splitlines()
    mine = [i for i, entry in enumerate(lines) if entry.endswith(f"# {marker}")]
    if not mine:
        return "\n".join(lines + [tagged]) + "\n"
    kept = [entry for i, entry in enumerate(lines) if i not in mine[1:]]
    kept[mine[0]] = tagged
    return "\n".join(kept) + "\n"


def without_managed_line(current: str | None, marker: str) -> str | None:
    if current is None:
        return None
    lines = current.splitlines()
    kept = [entry for entry in lines if not entry.endswith(f"# {marker}")]
    return "\n".join(kept) + ("\n" if kept else "")


def ensure_line(path: str, line: str, marker: str, current: str | None) -> Operation:
    """`path` holds `line` once, tagged with `marker` so fxctl can find and replace it later."""
    wanted = with_managed_line(current, line, marker)
    if current == wanted:
        return f"{path} has the {marker} line"
    yield write_file(path, wanted, "0644")
    return None


def ensure_no_line(path: str, marker: str, current: str | None) -> Operation:
    wanted = without_managed_line(current, marker)
    if current is None or wanted == current:
        return f"{path} has no {marker} line"
    yield write_file(path, wanted, "0644")
    return None
