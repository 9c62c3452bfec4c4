"""One module for paths (fxctl.paths: XDG state and cache) and one for units (fxctl.units), issue 16."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fxctl import paths
from fxctl.errors import BadInput
from fxctl.units import GIB, KIB, parse_size, size_bytes

PACKAGE = Path(paths.__file__).parent
# modules other sessions are changing now, still reading the environment themselves: to move to fxctl.paths
PENDING: set[str] = set()


def test_tuning_runs_follow_xdg_state_home(tmp_path, monkeypatch):
    from fxctl.tune.store import default_run_dir

    monkeypatch.delenv("FXCTL_RUN_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_run_dir().parent == tmp_path / "state" / "fxctl" / "runs"
    monkeypatch.setenv("FXCTL_RUN_DIR", str(tmp_path / "runs"))
    assert default_run_dir().parent == tmp_path / "runs" == paths.runs_dir()


def test_every_path_is_under_the_xdg_homes(tmp_path, monkeypatch):
    from fxctl.lab.paths import cache_root, state_root
    from fxctl.playbook.runner import runs_root

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "s"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.delenv("FXCTL_SERVE_STATE", raising=False)
    assert state_root() == tmp_path / "s/fxctl/lab" and cache_root() == tmp_path / "c/fxctl/lab"
    assert runs_root() == tmp_path / "s/fxctl/playbooks"
    assert paths.serve_state_dir() == tmp_path / "s/fxctl/serve"
    assert paths.bench_scratch_dir() == tmp_path / "c/fxctl/bench/tier"


def test_only_fxctl_paths_reads_the_xdg_variables():
    readers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if re.search(r'"XDG_[A-Z]+_HOME"|"~/\.(local|cache)|home\(\) / "\.(local|cache)', p.read_text())}
    assert readers - PENDING == {"paths.py"}, sorted(readers)


@pytest.mark.parametrize("text,value", [("65536", 65536), (65536, 65536), ("64K", 64 * KIB), ("64KiB", 64 * KIB),
                                        ("1.5G", 3 * GIB // 2), ("2TiB", 2 << 40), (" 8 GiB ", 8 * GIB)])
def test_sizes(text, value):
    assert parse_size(text) == value == size_bytes(text)


@pytest.mark.parametrize("text", ["lots", "-1", -1, True, "1X", "", None])
def test_bad_sizes(text):
    assert parse_size(text) is None
    with pytest.raises(BadInput):
        size_bytes(text, "--total")
