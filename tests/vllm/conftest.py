"""Real vLLM on CPU: the serving env (fxctl serve install-env) and the tiny model (fxctl serve make-model).

Both are made once and cached under $XDG_CACHE_HOME/fxctl (.ci/setup makes them before the tests). Every
test here is marked `vllm`; without the serving env they skip, except under CI, where they must run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fxctl.paths import serving_env_dir, tiny_model_dir

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/vllm/" in str(item.fspath):
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(scope="session")
def serving_python() -> str:
    python = os.environ.get("FXCTL_SERVING_PYTHON") or str(serving_env_dir() / "bin" / "python")
    if not Path(python).exists():
        if os.environ.get("CI"):
            pytest.fail(f"no serving env at {python}: .ci/setup makes it (fxctl serve install-env)")
        pytest.skip(f"no serving env at {python} (fxctl serve install-env)")
    return python


@pytest.fixture(scope="session")
def tiny_model(serving_python) -> str:
    """The tiny model in its default folder, made when missing (about 10 s)."""
    done = subprocess.run([sys.executable, "-m", "fxctl", "serve", "make-model", "--python", serving_python],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return str(tiny_model_dir())


@pytest.fixture
def local_state(tmp_path, monkeypatch):
    """Serve state of the test's own (fxctl serve --local keeps it under FXCTL_SERVE_STATE)."""
    state = tmp_path / "serve-state"
    monkeypatch.setenv("FXCTL_SERVE_STATE", str(state))
    return state
