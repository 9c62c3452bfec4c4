"""Profiles and playbooks ship inside the package (issue 16): a wheel carries them, and a copy installed from it
finds them from any directory. No network: the wheel is built with this venv's setuptools and installed
without dependencies into a folder put first on PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fxctl.errors import BadInput
from fxctl.shipped import playbook_path, profile_path, shipped_names

REPO = Path(__file__).resolve().parent.parent


def tracked(folder: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return sorted(Path(line).name for line in out.stdout.split() if line.endswith(".yaml"))


def run(argv: list, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def wheel_and_site(tmp_path_factory):
    pytest.importorskip("wheel")  # setuptools before 70 builds wheels with it (the test extra has it)
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", out,
         REPO])
    wheel = next(out.glob("fxctl-*.whl"))
    site = out / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", site, wheel])
    return wheel, site


def test_the_wheel_carries_every_profile_and_playbook(wheel_and_site):
    wheel, _site = wheel_and_site
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("profiles", "playbooks"):
        for name in tracked(folder):
            assert f"fxctl/data/{folder}/{name}" in names, f"{folder}/{name} is not in {wheel.name}"


def test_an_installed_copy_finds_them_from_another_directory(wheel_and_site, tmp_path):
    _wheel, site = wheel_and_site
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("FXCTL_INVENTORY", None)
    where = run([sys.executable, "-c", "import fxctl, fxctl.shipped as s; print(fxctl.__file__); "
                 "print(s.profile_path('lab')); print(s.playbook_path('lab-demo'))"], cwd=tmp_path, env=env)
    module, profile, playbook = where.stdout.split()
    assert all(Path(p).is_relative_to(site) for p in (module, profile, playbook)), where.stdout
    fxctl = [sys.executable, "-m", "fxctl"]
    assert "lab" in run([*fxctl, "profiles", "list"], cwd=tmp_path, env=env).stdout
    assert "Usage: fxctl run" in run([*fxctl, "run", "lab-demo", "--help"], cwd=tmp_path, env=env).stdout
    assert "calibration" in run([*fxctl, "sim", "calibrate"], cwd=tmp_path, env=env).stdout


def test_names_and_paths_resolve(tmp_path):
    assert "lab" in shipped_names("profiles") and "lab-demo" in shipped_names("playbooks")
    assert profile_path("lab") == profile_path("lab.yaml") and profile_path("lab").name == "lab.yaml"
    assert playbook_path("lab-demo").name == "lab-demo.yaml"
    own = tmp_path / "mine.yaml"
    own.write_text("name: mine\n")
    assert profile_path(str(own)) == own and playbook_path(str(own)) == own
    with pytest.raises(BadInput) as info:
        profile_path("no-such-profile")
    assert "lab" in info.value.hint


def test_profiles_list_and_show(monkeypatch, capsys):
    import json

    from tests.support.cli import run_main

    code, out, _ = run_main(["-o", "json", "profiles", "list"], monkeypatch, capsys)
    assert code == 0 and {"lab", "fixed-delays"} <= {row["name"] for row in json.loads(out)}
    code, out, _ = run_main(["profiles", "show", "lab"], monkeypatch, capsys)
    assert code == 0 and out.startswith(f"# {profile_path('lab')}\n") and "cost_model: roofline" in out
    code, _, err = run_main(["profiles", "show", "no-such"], monkeypatch, capsys)
    assert code == 2 and "no such profile" in err and "lab" in err
