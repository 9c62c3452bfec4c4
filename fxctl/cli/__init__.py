"""The command line: parse, call one library function, render. The error boundary lives in `main`."""

from __future__ import annotations

import importlib
import logging
import sys
import traceback

import click

from fxctl import __version__
from fxctl.cli.context import App
from fxctl.errors import ExitCode, FxError
from fxctl.output import FORMATS
from fxctl.remote.progress import show_progress

# (module under fxctl.cli, attribute): each is a click command or group
COMMAND_MODULES = (
    "inventory_cmd", "lab_cmd", "provision_cmd", "net_cmd", "serve_cmd",
    "sim_cmd", "bench_cmd", "tune_cmd", "run_cmd", "profiles_cmd",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=False),
              envvar="FXCTL_INVENTORY", show_envvar=True, help="Inventory YAML file.")
@click.option("-o", "--output", "output_format", type=click.Choice(FORMATS), default="table",
              show_default=True, help="Output format: a table for people, json or yaml for scripts.")
@click.option("-v", "--verbose", count=True, help="More detail (-v: commands; -vv: debug logging).")
@click.option("--traceback", "show_traceback", is_flag=True, help="Show the Python stack on errors.")
@click.version_option(__version__, prog_name="fxctl")
@click.pass_context
def cli(ctx: click.Context, inventory_path, output_format, verbose, show_traceback):
    """fxctl: deploy and tune tiered KV-cache LLM serving.

    KV cache spills from GPU HBM to a DRAM pool (L1) and to NVMe-over-Fabrics SSDs in md RAID0 (L2).

    \b
    Exit codes: 0 ok, 1 a host/step/gate failed, 2 bad input or usage,
    3 changes pending under --check, 4 not converged after apply,
    5 not implemented yet, 6 no point met the SLO (tune), 130 interrupted.
    """
    logging.basicConfig(level=logging.DEBUG if verbose >= 2 else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = App(inventory_path=inventory_path, output_format=output_format,
                  verbose=verbose, show_traceback=show_traceback)
    # hosts answering a fan-out show on stderr (in place on a terminal); stdout stays the command's output
    ctx.with_resource(show_progress())


for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"fxctl.cli.{_name}")
    cli.add_command(_module.command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI inside the one error boundary."""
    show_tb = "--traceback" in (argv if argv is not None else sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="fxctl", standalone_mode=False)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.BAD_INPUT)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except FxError as exc:
        if show_tb:
            traceback.print_exc()
        report_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(int(code or 0))


def report_error(exc: FxError) -> None:
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)
