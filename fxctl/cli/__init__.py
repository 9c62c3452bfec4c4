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

# name -> (module under fxctl.cli whose `command` it is, its one-line summary for `fxctl --help`). A command's
# module is imported only when that command runs or completes: `fxctl --version` and `--help` import none
# of them (start-up, issue 27 #6). tests/test_cli_startup.py checks each summary is its command's own.
COMMANDS = {
    "inventory": ("inventory_cmd", "Check and show the inventory; trust host keys; test SSH to hosts."),
    "lab": ("lab_cmd", "Run a QEMU test lab with NVMe-oF, Soft-RoCE, md RAID and XFS."),
    "provision": ("provision_cmd", "Provision NVMe-oF RAID0 arrays: export drives from targets (kernel nvmet, "
                                   "RDMA or TCP),..."),
    "net": ("net_cmd", "Configure and verify RoCEv2 lossless networking (PFC, DSCP, ECN, MTU, RDMA-CM, "
                       "Soft-RoCE)."),
    "serve": ("serve_cmd", "Launch vLLM + LMCache with fxctl's KV tier backend (or, with --engine sim, fxctl's..."),
    "sim": ("sim_cmd", "Serving emulator with a calibrated GPU cost model (no GPU needed)."),
    "bench": ("bench_cmd", "Benchmarks: the KV tier (tier) and the serving load generator (serve)."),
    "plan": ("plan_cmd", "Capacity planning: what fits in HBM, the tiers, the L2 bandwidth an SLO needs."),
    "tune": ("tune_cmd", "Find the best operating point under a latency SLO, by measurement."),
    "run": ("run_cmd", "Run a playbook of gated stages: each stage is an fxctl command (provision, net..."),
    "profiles": ("profiles_cmd", "Profiles that ship with fxctl: platform, model and serving layout, every "
                                 "cost-model..."),
}


class LazyGroup(click.Group):
    """The top-level group: its commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return importlib.import_module(f"fxctl.cli.{COMMANDS[name][0]}").command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_module, summary) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
