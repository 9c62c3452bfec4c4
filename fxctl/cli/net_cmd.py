"""`fxctl net`: RoCEv2 lossless networking: apply (per NIC vendor), verify (pyverbs probe), bench."""

from __future__ import annotations

import click

from fxctl.engine.apply import Status, summary_rows
from fxctl.output import emit, table
from fxctl.remote.journal import RunJournal


def progress_printer(app):
    def show(host: str, step: str) -> None:
        if app.output_format == "table":
            click.echo(f"   {host}: {step} ...", err=True)
    return show


@click.group(name="net")
def command():
    """Configure and verify RoCEv2 lossless networking (PFC, DSCP, ECN, MTU, RDMA-CM, Soft-RoCE).

    \b
    Examples:
      fxctl -i lab.yaml net apply --check     # what would change
      fxctl -i lab.yaml net apply             # converge; unsupported items are reported
      fxctl -i lab.yaml net apply --strict    # ... and fail when the NIC lacks one
      fxctl -i lab.yaml net verify            # RDMA ports, GIDs, counters (pyverbs probe)
      fxctl -i lab.yaml net bench target1 initiator1
    """


@command.command(name="apply")
@click.option("--check", is_flag=True, help="Plan only: show what would change; change nothing (exit 3 when "
              "changes are pending).")
@click.option("--strict", is_flag=True, help="Fail (exit 1) when the NIC lacks a capability the inventory asks "
              "for (PFC, trust, ETS, ECN on virtio ...); without it those are reported 'unsupported'.")
@click.option("--host", "hosts", multiple=True, help="Only this host, group or role (repeatable).")
@click.pass_obj
def apply_command(app, check, strict, hosts):
    """Apply the inventory's network section: MTU, address, global pause off, Soft-RoCE when asked, QoS
    through the NIC's driver (dcb | mlx5 | bnxt), RDMA-CM RoCE v2 and ToS; persisted by fxctl-net.service.
    Only what differs changes; a second run changes nothing."""
    from fxctl.net.apply import apply

    journal = RunJournal.new("net-apply")
    result = apply(app.inventory(), hosts=list(hosts) or None, check=check, strict=strict, journal=journal,
                   progress=progress_printer(app))
    render_apply(app, result, journal)
    code = result.exit_code()
    if code:
        raise click.exceptions.Exit(code)


def apply_rows(reports, verbose: int) -> list[list[str]]:
    """The engine's summary rows; a step pending under --check says how many commands it would run."""
    rows = summary_rows(reports, verbose)
    pending = iter([s for r in reports for s in r.steps])
    out = []
    for row in rows:
        step = next(pending, None) if row[1] not in ("-", "(verify)") else None
        if step is not None and step.status == Status.PENDING and not verbose:
            row = [*row[:3], f"{len(step.commands)} command(s) (-v shows them)"]
        out.append(row)
    return out


def render_apply(app, result, journal) -> None:
    data = {"action": "net apply", "check": result.check, "strict": result.strict, "journal": str(journal.path),
            "hosts": result.reports,
            "unsupported": [{"host": h, "step": s, "reason": r} for h, s, r in result.unsupported()]}
    if app.output_format != "table":
        emit(data, app.output_format)
        return
    click.echo(table(apply_rows(result.reports, app.verbose), ["host", "step", "status", "detail"]))
    changed = sum(1 for r in result.reports for s in r.steps if s.status in (Status.CHANGED, Status.PENDING))
    failed = [r.host for r in result.reports if r.status == Status.FAILED]
    unsupported = result.unsupported()
    verb = "would change" if result.check else "changed"
    click.echo(f"\nnet apply: {changed} step(s) {verb}; {len(unsupported)} unsupported"
               + (" (--strict: failure)" if unsupported and result.strict else "")
               + (f"; FAILED on {', '.join(failed)}" if failed else "; all hosts ok") + f"; journal: {journal.path}")
    for report in result.reports:
        if report.hint:
            click.echo(f"{report.host}: {report.error}\n  hint: {report.hint}")


@command.command(name="verify")
@click.option("--host", "hosts", multiple=True, help="Only this host, group or role (repeatable).")
@click.option("--no-traffic", is_flag=True, help="Read counters once; send no RDMA traffic between the hosts.")
@click.pass_obj
def verify_command(app, hosts, no_traffic):
    """Probe every RDMA port with the host's own python3 (pyverbs; sysfs and `rdma -j link` without it):
    state, active MTU, link layer, the RoCE v2 GID of the configured address, and counters before and after
    RDMA traffic between the hosts. Exit 1 when a port differs from the inventory."""
    from fxctl.net.verify import verify

    journal = RunJournal.new("net-verify")
    result = verify(app.inventory(), hosts=list(hosts) or None, traffic=not no_traffic, journal=journal)
    if app.output_format != "table":
        emit({**result, "journal": str(journal.path)}, app.output_format)
    else:
        click.echo(table([[p["host"], p["port"], p["state"], p["active_mtu"], p["link_layer"],
                           p["gid_index"] if p["gid_index"] is not None else "-", p["netdev"] or "-",
                           "ok" if p["ok"] else "FAILED", p["detail"]] for p in result["ports"]],
                         ["host", "port", "state", "mtu", "link", "roce v2 gid", "netdev", "result", "detail"]))
        if result["counters"]:
            click.echo()
            click.echo(table([[c["host"], c["port"], c["counter"], c["before"], c["after"], c["delta"]]
                              for c in result["counters"]], ["host", "port", "counter", "before", "after", "delta"]))
        for problem in result["problems"]:
            click.echo(f"FAILED {problem}")
        click.echo(f"\nnet verify: {'ok' if result['ok'] else 'FAILED'} ({result['probe']}); journal: {journal.path}")
    if not result["ok"]:
        raise click.exceptions.Exit(1)


@command.command(name="bench")
@click.argument("server")
@click.argument("client")
@click.option("--seconds", default=5, show_default=True, type=click.IntRange(1, 600), help="Duration (-D).")
@click.option("--size", default=1048576, show_default=True, type=click.IntRange(1, 1 << 30), help="Message size (-s).")
@click.option("--qps", default=4, show_default=True, type=click.IntRange(1, 64), help="Queue pairs (-q).")
@click.pass_obj
def bench_command(app, server, client, seconds, size, qps):
    """RDMA write bandwidth from CLIENT to SERVER with perftest's ib_write_bw over the inventory's RoCE v2
    GID; prints its parsed JSON result."""
    from fxctl.net.bench import bench

    journal = RunJournal.new("net-bench")
    result = bench(app.inventory(), server, client, seconds=seconds, size=size, qps=qps, journal=journal)
    if app.output_format != "table":
        emit({**result, "journal": str(journal.path)}, app.output_format)
        return
    click.echo(table([[result["server"], result["client"], result["device_server"], result["gid_index_server"],
                       result["msg_size"], result["bw_avg_gbps"], result["bw_peak_gbps"], result["msg_rate_mpps"]]],
                     ["server", "client", "device", "gid", "size", "avg Gb/s", "peak Gb/s", "Mpps"]))
