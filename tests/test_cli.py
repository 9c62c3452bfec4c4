"""The command line through click's CliRunner: help everywhere, exit codes, output formats."""

from __future__ import annotations

import json

import click
import pytest
import yaml
from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.cli.completions import SHELLS, completion_script
from fxctl.errors import ExitCode
from tests.support.cli import run_main


def all_commands(group: click.Group, prefix=()):
    for name in group.list_commands(None):          # the top level loads its commands lazily
        command = group.get_command(None, name)
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from all_commands(command, prefix + (name,))


@pytest.mark.parametrize("path,command", list(all_commands(cli)),
                         ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_command_has_help(path, command):
    assert (command.help or command.short_help or "").strip(), f"fxctl {' '.join(path)} has no help text"
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_root_help_lists_exit_codes():
    result = CliRunner().invoke(cli, ["--help"])
    assert "Exit codes" in result.output and "3 changes pending" in result.output


def test_inventory_check_ok(repo_root, monkeypatch, capsys):
    code, out, _ = run_main(["-i", str(repo_root / "examples/inventory.yaml"), "inventory", "check"],
                            monkeypatch, capsys)
    assert code == 0 and "valid (4 hosts, 2 arrays)" in out


def test_inventory_check_bad_exits_2_with_file_line_key(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nhosts:\n  a: {address: 192.0.2.1, colour: red}\n")
    code, out, _ = run_main(["-i", str(bad), "inventory", "check"], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT
    assert f"{bad}:3: hosts.a.colour: unknown key" in out


def test_inventory_check_json(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nhosts:\n  a: {address: 192.0.2.1, port: -1}\n")
    code, out, _ = run_main(["-o", "json", "-i", str(bad), "inventory", "check"], monkeypatch, capsys)
    data = json.loads(out)
    assert code == 2 and data["valid"] is False
    assert data["problems"][0] == {"file": str(bad), "line": 3, "key": "hosts.a.port",
                                   "message": "must be between 1 and 65535, got -1"}


def test_ping_of_an_unknown_host_exits_2_before_connecting(repo_root, monkeypatch, capsys):
    code, _, err = run_main(["-i", str(repo_root / "examples/inventory.yaml"), "inventory", "ping", "gpu9"],
                            monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT
    assert err.splitlines()[0] == "error: no host, group or role is named 'gpu9'"


@pytest.mark.parametrize("text,expected", [
    ("- version: 1\n", ":1: must be a mapping, got a list"),
    ("version: 1\nhosts: &h\n  a: *h\n", ":3: hosts.a: a YAML alias refers to a value that contains it"),
])
def test_inventory_check_of_an_odd_file_exits_2_without_a_traceback(tmp_path, monkeypatch, capsys, text, expected):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    code, out, err = run_main(["-i", str(bad), "inventory", "check"], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT and f"{bad}{expected}" in out and "Traceback" not in out + err


def test_inventory_from_environment(repo_root, monkeypatch, capsys):
    from fxctl.cli import main

    monkeypatch.setenv("FXCTL_INVENTORY", str(repo_root / "examples/inventory.yaml"))
    with pytest.raises(SystemExit) as info:
        main(["-o", "yaml", "inventory", "show"])
    data = yaml.safe_load(capsys.readouterr().out)
    assert info.value.code == 0 and data["hosts"]["gpu1"]["user"] == "ops"


def test_domain_error_is_one_line_plus_hint(monkeypatch, capsys):
    code, out, err = run_main(["inventory", "show"], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT
    assert err.splitlines() == ["error: no inventory given",
                                "hint: pass -i FILE or set FXCTL_INVENTORY (see examples/inventory.yaml)"]


def test_usage_error_exits_2(monkeypatch, capsys):
    code, _, err = run_main(["--output", "xml", "inventory", "check"], monkeypatch, capsys)
    assert code == 2 and "xml" in err


def test_an_unfinished_group_says_so_and_exits_5(monkeypatch, capsys):
    """Every group is built today; the helper that stands in for one that is not must never pretend."""
    from fxctl.cli import report_error
    from fxctl.cli.not_implemented import not_implemented_group
    from fxctl.errors import FxError

    stub = not_implemented_group("future", "A feature to come.", 99)
    with pytest.raises(FxError) as info:
        stub.main(args=["--anything"], standalone_mode=False)
    assert info.value.exit_code == ExitCode.NOT_IMPLEMENTED
    report_error(info.value)
    assert "'fxctl future' is not implemented yet" in capsys.readouterr().err
    assert "Not implemented yet (issue 99)" in stub.help


def test_completions_are_current(repo_root):
    for shell, name in SHELLS.items():
        assert (repo_root / "completions" / name).read_text() == completion_script(shell), \
            f"completions/{name} is stale: run python -m fxctl.cli.completions"


@pytest.mark.parametrize("args,flags", [(["serve", "--name", "x", "status"], "--name"),
                                        (["serve", "--ready-timeout", "600", "--local", "stop"],
                                         "--ready-timeout, --local")])
def test_serve_options_before_a_subcommand_are_named_even_a_default_typed_out(args, flags, monkeypatch, capsys):
    # --ready-timeout 600 is the default: only where the value came from tells that the user wrote it there
    code, _, err = run_main(args, monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT and f"error: {flags}: options go after the subcommand" in err
    assert f"fxctl serve {args[-1]} --help" in err
