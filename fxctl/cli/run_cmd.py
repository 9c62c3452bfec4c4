"""`fxctl run PLAYBOOK`: ordered stages with gates (G1-G4), resumable, reported."""

from __future__ import annotations

import time
from pathlib import Path

import click

from fxctl.errors import BadInput, ExitCode
from fxctl.output import emit
from fxctl.playbook.model import load_playbook
from fxctl.playbook.report import as_data, terminal_table, write_reports
from fxctl.playbook.runner import run_playbook, runs_root
from fxctl.shipped import playbook_path, shipped_dir

PLAYBOOKS = shipped_dir("playbooks")   # the shipped playbooks (package data; see fxctl.shipped)


def find_playbook(name: str) -> Path:
    """A playbook file as given, or a shipped playbook's name."""
    return playbook_path(name)


@click.command(name="run")
@click.argument("playbook")
@click.option("--from", "start_from", metavar="STAGE", help="Start at this stage (earlier ones not run).")
@click.option("--only", metavar="STAGE", help="Run only this stage.")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False), metavar="RUN_DIR",
              help="Continue a run: stages that passed there are skipped.")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Where stage results and reports go.")
@click.option("--var", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a playbook variable.")
@click.pass_obj
def command(app, playbook, start_from, only, resume_dir, run_dir, overrides):
    """Run a playbook of gated stages: each stage is an fxctl command (provision, net apply/verify/bench,
    serve, bench, tune ...), each gate compares measured values with thresholds (G1 network, G2 storage,
    G3 serving, G4 performance). Prints the gate table; writes report.json and report.md.

    \b
    Examples:
      fxctl run lab-demo                         # the shipped lab demonstration
      fxctl run acceptance -i cluster.yaml       # G1-G4 on a real cluster
      fxctl run lab-demo --resume RUN_DIR        # after a failure: passed stages are skipped
    """
    path = find_playbook(playbook)
    variables = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise BadInput(f"--var {item!r} is not KEY=VALUE")
        variables[key] = value
    folder = Path(resume_dir or run_dir or runs_root() / path.stem / time.strftime("%Y%m%d-%H%M%S"))
    folder.mkdir(parents=True, exist_ok=True)
    book = load_playbook(path, variables, builtins={"run_dir": str(folder.resolve())})
    progress = (lambda line: click.echo(line, err=True)) if app.output_format == "table" else None
    results = run_playbook(book, inventory=app.inventory_path, run_dir=folder, only=only,
                           start_from=start_from, resume=bool(resume_dir), progress=progress)
    reports = write_reports(book, results, folder)
    data = as_data(book, results, folder)
    plots = sorted(str(p) for p in folder.rglob("*.png"))
    emit({**data, "reports": {k: str(v) for k, v in reports.items()}, "plots": plots}, app.output_format,
         text=terminal_table(results) + f"\n\n{'PASSED' if data['passed'] else 'FAILED'}: report "
         f"{reports['markdown']} (JSON: {reports['json']})" + "".join(f"\nplot: {p}" for p in plots))
    if not data["passed"]:
        raise click.exceptions.Exit(ExitCode.HOST_FAILED)
