"""Where fxctl keeps things on this machine (XDG base directories): one place for every such path.

cache: rebuildable downloads and builds (the lab image, wheels, the serving env, the tiny model);
state: what running things leave (serve state, lab state, run journals).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """$XDG_CACHE_HOME/fxctl (or ~/.cache/fxctl)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fxctl"


def state_home() -> Path:
    """$XDG_STATE_HOME/fxctl (or ~/.local/state/fxctl)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "fxctl"


def serving_env_dir() -> Path:
    """The CPU serving env `fxctl serve install-env` makes by default."""
    return cache_home() / "serving-env"


def tiny_model_dir() -> Path:
    """The model `fxctl serve make-model` makes by default."""
    return cache_home() / "models" / "tiny-llama"
