"""Options declared once (fxctl.options, fxctl.cli.option_model): a dataclass field gives the option its type,
default and help; the command line only says what the user set, so the field's default is the one default."""

from __future__ import annotations

import dataclasses
import json

import click
from click.testing import CliRunner

from fxctl.cli.option_model import cli_fields, click_options, given
from fxctl.options import int_list, option


@dataclasses.dataclass
class Shape:
    name: str = option("--name", "What it is called.")
    count: int = option("--count", "How many.", default=4, min=1, max=9)
    sizes: list[int] = option("--sizes", "Sizes.", default_factory=lambda: [1, 2], parse=int_list, show="1,2")
    kind: str = option("--kind", "Which kind.", default="a", choices=("a", "b"))
    tags: list[str] = option("--tag", "Repeatable.", default_factory=list, multiple=True)
    fast: bool = option("--fast", "Go fast.", default=False, is_flag=True)
    internal: float = 0.5       # no command-line spelling: not an option


@click.command()
@click_options(Shape)
def show(**values):
    click.echo(json.dumps(dataclasses.asdict(Shape(**given(Shape, values)))))


def run(*args):
    return CliRunner().invoke(show, list(args))


def test_what_is_not_given_takes_the_fields_default():
    done = run("--name", "x")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"name": "x", "count": 4, "sizes": [1, 2], "kind": "a", "tags": [],
                                       "fast": False, "internal": 0.5}
    done = run("--name", "x", "--count", "9", "--sizes", "3,4", "--kind", "b", "--tag", "p", "--tag", "q", "--fast")
    assert json.loads(done.output) == {"name": "x", "count": 9, "sizes": [3, 4], "kind": "b", "tags": ["p", "q"],
                                       "fast": True, "internal": 0.5}


def test_bad_values_exit_2_naming_the_option_and_what_is_allowed():
    assert run("--count", "0").exit_code == 2 and "--count" in run("--count", "0").output
    done = run("--sizes", "1,x")
    assert done.exit_code == 2 and "'x' in '1,x' is not a whole number" in done.output
    done = run("--kind", "c")
    assert done.exit_code == 2 and "'c' is not one of 'a', 'b'" in done.output


def test_help_shows_each_default_once_from_the_field():
    text = run("--help").output
    assert "How many.  [default: 4]" in text and "Sizes.  [default: 1,2]" in text and "--internal" not in text


def test_fxctl_tune_options_are_tune_options_fields_with_no_default_of_their_own():
    from fxctl.cli.tune_cmd import command
    from fxctl.tune.options import TuneOptions

    params = {p.name: p for p in command.params}
    for f, spec in cli_fields(TuneOptions):
        assert f.name in params, f.name
        assert params[f.name].default in (None, False), (f.name, params[f.name].default)   # the field's applies
        assert spec.flag in params[f.name].opts
    assert TuneOptions(slo="ttft_p50<=1s").time_scale == 0.005       # per target, resolved in one place
    assert TuneOptions(slo="ttft_p50<=1s", target="vllm").clock == "wall"


def test_serve_start_and_monitor_take_the_overrides_each_declared_once():
    from fxctl.cli.serve_cmd import start_command
    from fxctl.cli.serve_monitor_cmd import monitor_command
    from fxctl.serve.overrides import ServeOverrides

    for command in (start_command, monitor_command):
        params = {p.name: p for p in command.params}
        for f, spec in cli_fields(ServeOverrides):
            assert spec.flag in params[f.name].opts and params[f.name].default is None, (command.name, f.name)
    assert params["engine_command"].hidden


def test_a_size_that_is_not_one_exits_2_naming_the_option(tmp_path):
    from fxctl.cli import cli

    for bad in ("0", "lots", "1.5.2GiB"):
        done = CliRunner().invoke(cli, ["serve", "start", "--local", "--profile", "cpu-tiny", "--dry-run",
                                         "--l2-dir", str(tmp_path), "--l2-size", bad])
        assert done.exit_code == 2 and "--l2-size" in done.output and repr(bad) in done.output, done.output
