"""Where fxctl keeps things on this machine (XDG base directories): one place for every such path.

cache: rebuildable downloads and builds (the lab image, wheels, the serving env, the tiny model, bench scratch);
state: what running things leave (serve state, lab state, run journals, tuning and playbook runs).
Environment overrides: FXCTL_RUN_DIR (run journals and tuning runs), FXCTL_SERVE_STATE (local serve state).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


def runs_dir() -> Path:
    """Run journals and tuning runs: $FXCTL_RUN_DIR, or $XDG_STATE_HOME/fxctl/runs."""
    return Path(os.environ.get("FXCTL_RUN_DIR") or state_home() / "runs")


def playbook_runs_dir() -> Path:
    """Playbook runs (`fxctl run`): $XDG_STATE_HOME/fxctl/playbooks."""
    return state_home() / "playbooks"


def serve_state_dir() -> Path:
    """Local deployments (`fxctl serve --local`): $FXCTL_SERVE_STATE, or $XDG_STATE_HOME/fxctl/serve."""
    return Path(os.environ.get("FXCTL_SERVE_STATE") or state_home() / "serve")


def serve_cache_dir() -> Path:
    """Wheels `fxctl serve` builds to push to hosts: $XDG_CACHE_HOME/fxctl/serve."""
    return cache_home() / "serve"


def lab_cache_dir() -> Path:
    """The lab's image cache, one folder per recipe key: $XDG_CACHE_HOME/fxctl/lab."""
    return cache_home() / "lab"


def lab_state_dir() -> Path:
    """The labs' state, one folder per lab: $XDG_STATE_HOME/fxctl/lab."""
    return state_home() / "lab"


def bench_scratch_dir() -> Path:
    """Default place of `fxctl bench tier`'s scratch directory: $XDG_CACHE_HOME/fxctl/bench/tier."""
    return cache_home() / "bench" / "tier"


@contextmanager
def scratch_dir(parent: str | os.PathLike, keep: bool = False, prefix: str = "fxctl-bench-") -> Iterator[str]:
    """A new, empty directory inside `parent` (made if missing) for a benchmark's files; on leaving, it is
    removed (unless keep), and so is `parent` if this made it and it is empty. Nothing that was already in
    `parent` is touched, so `parent` may be a mount that holds data (an L2 array). OSError if it cannot be made."""
    parent = os.fspath(parent)
    made = not os.path.exists(parent)
    os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
            if made:
                try:
                    os.rmdir(parent)
                except OSError:  # not empty: something else is there now
                    pass
