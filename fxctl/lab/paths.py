"""Where the lab keeps its image cache (per recipe) and its state (per lab name)."""

from __future__ import annotations

import re
from pathlib import Path

from fxctl.errors import BadInput
from fxctl.paths import lab_cache_dir, lab_state_dir

LAB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
DEFAULT_LAB_NAME = "lab"


def cache_root() -> Path:
    """$XDG_CACHE_HOME/fxctl/lab (or ~/.cache/fxctl/lab): one folder per recipe key."""
    return lab_cache_dir()


def state_root() -> Path:
    """$XDG_STATE_HOME/fxctl/lab (or ~/.local/state/fxctl/lab): one folder per lab."""
    return lab_state_dir()


def check_lab_name(name: str) -> str:
    if not LAB_NAME.fullmatch(name):  # $ alone would let a trailing newline through
        raise BadInput(f"lab name {name!r} is not valid",
                       "use 1-31 lowercase letters, digits and dashes, starting with a letter or digit")
    return name


def lab_dir(name: str) -> Path:
    return state_root() / check_lab_name(name)
