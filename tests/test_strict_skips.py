"""Under CI a skipped lab/vllm/lmcache test fails the run; on a developer's machine it still skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_run(args: list[str], cwd: Path, ci: str | None, path: str | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "FXCTL_LAB_NAME")}
    env["PYTHONPATH"] = str(REPO)
    if ci is not None:
        env["CI"] = ci
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("ci", ["true", None])
def test_a_lab_test_without_qemu(tmp_path, ci):
    """The real lab fixture on a machine whose PATH has no qemu-system-x86_64."""
    bare = tmp_path / "bin"
    bare.mkdir()
    done = pytest_run(["-m", "lab", "-x", "tests/lab/test_lab_guests.py"], REPO, ci, path=str(bare))
    tail = done.stdout[-3000:]
    assert "qemu-system-x86_64 is not installed" in tail, tail
    if ci:   # the lab fixture's skip becomes an error at set-up, and -x stops there
        assert "CI is set: this lab test must run, but it skipped" in tail and "1 error" in tail, tail
        assert done.returncode != 0
    else:
        assert "10 skipped" in tail and "error" not in tail and done.returncode == 0, tail


SYNTHETIC = '''
import pytest

@pytest.mark.lmcache
def test_marked():
    pytest.skip("lmcache does not import")

def test_unmarked():
    pytest.skip("not a real-engine test")
'''


@pytest.mark.parametrize("ci", ["true", None, "false"])
def test_marked_skips_and_whole_module_skips(tmp_path, ci):
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    (tmp_path / "test_whole.py").write_text('import pytest\npytest.importorskip("no_such_module_fxctl")\n')
    marked = pytest_run(["-p", "tests.support.strict_skips", "test_synthetic.py"], tmp_path, ci)
    whole = pytest_run(["-p", "tests.support.strict_skips", "test_whole.py"], tmp_path, ci)
    if ci == "true":
        assert "CI is set: this lmcache test must run, but it skipped: lmcache does not import" in marked.stdout
        assert "1 failed, 1 skipped" in marked.stdout and "not a real-engine test" in marked.stdout  # stays a skip
        assert "test_whole.py skipped as a whole at import" in whole.stdout and "no_such_module_fxctl" in whole.stdout
        assert marked.returncode != 0 and whole.returncode != 0
    else:
        assert "2 skipped" in marked.stdout and marked.returncode == 0, marked.stdout
        assert "1 skipped" in whole.stdout and whole.returncode in (0, 5), whole.stdout   # 5: no test ran
