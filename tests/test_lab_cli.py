"""`fxctl lab` through the real error boundary, without QEMU: no lab, bad names, help."""

from __future__ import annotations

import pytest

from fxctl.errors import ExitCode
from tests.support.cli import run_main


def run(args, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("FXCTL_LAB_NAME", raising=False)
    return run_main(args, monkeypatch, capsys)


def test_status_of_a_lab_that_never_ran_is_bad_input(monkeypatch, capsys, tmp_path):
    code, _, err = run(["lab", "status", "--name", "nothere"], monkeypatch, capsys, tmp_path)
    assert code == ExitCode.BAD_INPUT
    assert "no lab named nothere" in err and "fxctl lab up" in err


def test_inventory_of_a_stopped_lab_fails_with_a_hint(monkeypatch, capsys, tmp_path):
    code, out, err = run(["lab", "inventory", "--name", "nothere"], monkeypatch, capsys, tmp_path)
    assert code == ExitCode.HOST_FAILED and out == ""
    assert "not running" in err


@pytest.mark.parametrize("name", ["../etc", "lab\n"])
def test_lab_names_are_checked(monkeypatch, capsys, tmp_path, name):
    code, _, err = run(["lab", "status", "--name", name], monkeypatch, capsys, tmp_path)
    assert code == ExitCode.BAD_INPUT and "not valid" in err


def test_down_of_an_unknown_lab_is_harmless(monkeypatch, capsys, tmp_path):
    code, _, err = run(["lab", "down", "--name", "nothere"], monkeypatch, capsys, tmp_path)
    assert code == ExitCode.OK and "nothing recorded" in err
