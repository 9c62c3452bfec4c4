"""`fxctl provision`: NVMe-oF RAID0 arrays from the inventory (and `--destroy`)."""

from __future__ import annotations

import click

from fxctl.engine.apply import Status, exit_code_for, summary_rows
from fxctl.errors import ExitCode
from fxctl.output import emit, table
from fxctl.remote.journal import RunJournal


def progress_printer(app):
    def show(host_or_kind: str, step: str) -> None:
        if app.output_format == "table":
            text = f"== {step}" if host_or_kind == "round" else f"   {host_or_kind}: {step} ..."
            click.echo(text, err=True)
    return show


@click.command(name="provision")
@click.option("--check", is_flag=True, help="Plan only: print what would change where; change nothing (exit 3 "
              "when changes are pending).")
@click.option("--destroy", is_flag=True, help="Tear down in reverse order: unmount, stop md, disconnect, "
              "unexport. Refuses a busy mount. Drive contents stay unless --wipe.")
@click.option("--wipe", is_flag=True, help="Allow erasing signatures on drives (named by serial or ID in the "
              "inventory) and md superblocks. Without it, a drive holding data is refused.")
@click.option("--array", "arrays", multiple=True, help="Only this array (repeatable); default: all.")
@click.pass_obj
def command(app, check, destroy, wipe, arrays):
    """Provision NVMe-oF RAID0 arrays: export drives from targets (kernel nvmet, RDMA or TCP), connect
    the initiators, build md RAID0 (64 KiB chunk) and XFS aligned to the stripe, mount, persist across
    reboot, verify. Idempotent: a second run changes nothing.

    \b
    Examples:
      fxctl -i lab.yaml provision --check      # what would change
      fxctl -i lab.yaml provision              # converge and verify
      fxctl -i lab.yaml provision --destroy    # tear down, keep data
    """
    from fxctl.provision.rounds import destroy as run_destroy
    from fxctl.provision.rounds import provision as run_provision

    inventory = app.inventory()
    journal = RunJournal.new("destroy" if destroy else "provision")
    action = run_destroy if destroy else run_provision
    result = action(inventory, arrays=list(arrays) or None, check=check, wipe=wipe, journal=journal,
                    progress=progress_printer(app))
    render(app, result, journal)
    code = exit_code_for(result.all_reports(), check)
    if code == ExitCode.OK and any(not v["ok"] for v in result.verify):
        code = ExitCode.HOST_FAILED
    if code:
        raise click.exceptions.Exit(code)


def render(app, result, journal) -> None:
    data = {"action": result.action, "check": result.check, "journal": str(journal.path),
            "rounds": [{"round": r.name, "hosts": r.reports} for r in result.rounds], "verify": result.verify}
    if app.output_format != "table":
        emit(data, app.output_format)
        return
    rows = [[rnd.name, *row] for rnd in result.rounds for row in summary_rows(rnd.reports, app.verbose)]
    click.echo(table(rows, ["round", "host", "step", "status", "detail"]))
    if result.verify:
        click.echo()
        click.echo(table([[v["host"], v["array"], v["check"], "ok" if v["ok"] else "FAILED", v["detail"]]
                          for v in result.verify], ["host", "array", "verify", "result", "detail"]))
    click.echo("\n" + summary_line(result, journal.path))


def summary_line(result, journal_path) -> str:
    """One line: steps changed (or pending under --check), then which hosts failed or still differ."""
    reports = result.all_reports()
    moved = [(r.host, s) for r in reports for s in r.steps if s.status in (Status.CHANGED, Status.PENDING)]
    failed = sorted(result.failed_hosts())
    pending = sorted({host for host, _ in moved})
    if failed:
        state = f"FAILED on {', '.join(failed)}"
    elif result.check and pending:  # "ok" would hide that a host differs from the inventory
        state = f"changes pending on {', '.join(pending)}"
    else:
        state = "all hosts ok"
    verb = "would change" if result.check else "changed"
    return f"{result.action}: {len(moved)} step(s) {verb}; {state}; journal: {journal_path}"
