"""`fxctl serve monitor` (Prometheus scrape config, rules, Grafana dashboard for a deployment) and
`fxctl serve top` (a live view of the running instances)."""

from __future__ import annotations

import time

import click

from fxctl.cli.serve_options import resolve_where, settings_options, where_options
from fxctl.errors import ExitCode
from fxctl.monitor.rules import Thresholds
from fxctl.output import emit

DEFAULTS = Thresholds()

MONITOR_HELP = """Write Prometheus and Grafana files for a deployment: prometheus.yml (a scrape job per component:
fxctl-engine, fxctl-tier, fxctl-router, fxctl-array; targets labelled host, deployment, instance),
fxctl-rules.yml (recording rules and alerts: a target down, tier errors, L2 near its cap, the L2 hit rate
collapsing after a restart, an array degraded) and fxctl-dashboard.json (Grafana). The deployment is given
as to `fxctl serve start` (profile, inventory, options); nothing on the hosts is read or changed.

\b
  fxctl serve monitor --local --profile cpu-tiny --l2-dir /var/tmp/fxtier --out /etc/prometheus/fxctl
  fxctl -i site.yaml serve monitor --out monitoring/   # needs serve.metrics_address: 0.0.0.0
  promtool check config monitoring/prometheus.yml
Exit codes: 0 written, 2 bad input (a loopback-only endpoint on a remote host is one)."""


@click.command("monitor", help=MONITOR_HELP)
@settings_options
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory for the files.")
@click.option("--scrape-interval", type=click.IntRange(1, 3600), default=15, show_default=True,
              help="Seconds between scrapes (and rule evaluations).")
@click.option("--alert-for", type=click.IntRange(0, 86400), default=DEFAULTS.for_s, show_default=True,
              help="Seconds a condition holds before its alert fires.")
@click.option("--l2-full", type=click.FloatRange(0, 1, min_open=True), default=DEFAULTS.l2_full, show_default=True,
              help="The L2 fill (usage / capacity) above which FxctlTierL2NearCap fires.")
@click.option("--no-arrays", is_flag=True, help="Leave the inventory's array exporters out.")
@click.pass_obj
def monitor_command(app, out_dir, scrape_interval, alert_for, l2_full, no_arrays, hosts, local, **options):
    from fxctl.cli.serve_settings import settings_of
    from fxctl.monitor import files
    from fxctl.monitor.targets import array_targets, deployment_targets
    from fxctl.serve import deploy

    where, inventory = resolve_where(app, hosts, local)
    settings = settings_of(options, where, inventory)
    plans = deploy.dry_run(settings, where)
    targets = deployment_targets(plans, where.address_of, settings.metrics_address, where.local)
    if not no_arrays and not where.local and inventory is not None:
        targets += array_targets(inventory, inventory.monitoring)
    thresholds = Thresholds(for_s=alert_for, l2_full=l2_full)
    written = files.write(out_dir, files.render(targets, thresholds, scrape_interval))
    emit({"files": written, "targets": [{"job": t.job, "address": t.address, **t.labels} for t in targets]},
         app.output_format, rows=[(t.job, t.address, t.host, t.instance) for t in targets],
         headers=["job", "target", "host", "instance"])
    if app.output_format == "table":
        click.echo("wrote " + ", ".join(written))


TOP_HELP = """A live view of the running instances, refreshed like top: per instance requests/s, requests running,
TTFT p50 over the last interval, vLLM's prefix-cache and KV-connector hit rates (tokens), fxctl's tier hits
per tier (chunks), L2 bytes/s read and written, L2 fill and errors. Read from each instance's metrics on
its host (over SSH for inventory hosts). Ctrl-C ends it; --iterations N ends after N refreshes;
with -o json one interval is measured and printed.

Exit codes: 0, 1 a host could not be read, 2 bad input."""


@click.command("top", help=TOP_HELP)
@where_options
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--iterations", type=click.IntRange(0, None), default=0, show_default=True,
              help="Refreshes before exiting (0: until Ctrl-C).")
@click.pass_obj
def top_command(app, name, hosts, local, interval, iterations):
    from rich.console import Console
    from rich.live import Live

    from fxctl.monitor.screen import table
    from fxctl.monitor.top import read_pages, rows_between
    from fxctl.serve.where import state_dir_for

    where, _ = resolve_where(app, hosts, local)
    state_dir = state_dir_for(where)
    before, errors = read_pages(where, state_dir, name)
    if app.output_format != "table":
        time.sleep(interval)
        after, errors = read_pages(where, state_dir, name)
        emit({"interval_s": interval, "instances": rows_between(before, after), "errors": errors},
             app.output_format)
        raise SystemExit(ExitCode.HOST_FAILED if errors else 0)
    console = Console()
    if not console.is_terminal:   # piped: every column, not the 80 a pipe defaults to
        console = Console(width=200)
    done = 0
    title = lambda: f"fxctl serve top  {time.strftime('%H:%M:%S')}  every {interval:g}s  (Ctrl-C ends)"  # noqa: E731
    with Live(table([], title=title(), errors=errors), console=console, screen=console.is_terminal,
              auto_refresh=False, transient=False) as live:
        try:
            while not iterations or done < iterations:
                time.sleep(interval)
                after, errors = read_pages(where, state_dir, name)
                live.update(table(rows_between(before, after), title=title(), errors=errors), refresh=True)
                before, done = after, done + 1
        except KeyboardInterrupt:
            pass
    raise SystemExit(ExitCode.HOST_FAILED if errors else 0)
