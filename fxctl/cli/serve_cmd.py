"""`fxctl serve`: launch vLLM + LMCache with fxctl's KV tier (or the emulator), locally or on the hosts."""

from __future__ import annotations

import click
from click.core import ParameterSource

from fxctl.cli.serve_options import name_option, resolve_where, start_options, where_options
from fxctl.engine.apply import Status
from fxctl.errors import BadInput, ExitCode
from fxctl.output import emit, table

START_HELP = """Start serving: pre-flight, launch each instance, wait until ready, confirm fxctl's tier loaded.

\b
Where: --local (this machine; the default without an inventory), --host NAME (repeatable), or the
inventory's serve.hosts. Remote instances run as systemd transient units (fxctl-serve-<name>-<i>) where
systemd runs, otherwise as supervised processes (new session, pidfile); logs are kept in the state dir
(/var/lib/fxctl/serve/<name>/<i>/serve.log on hosts, $XDG_STATE_HOME/fxctl/serve locally).
Settings: the profile, then the inventory's serve section, then these options. Sizes from a profile are per
instance; --l1-size/--l2-size (and the inventory's) are per host, split between its instances.

\b
Examples:
  fxctl serve start --profile mi308x-qwen3-coder-480b-tp4x2 --l2-dir /mnt/kvtier/fxtier --dry-run
  fxctl -i inventory.yaml serve start --check     # pre-flight on the hosts, read only: what start would do
  fxctl serve --engine sim --profile lab --local          # the emulator on this machine
  fxctl -i lab.yaml serve start --engine sim --profile lab --host initiator1 --l2-size 512MiB
"""


@click.group("serve", invoke_without_command=True, help="""Launch vLLM + LMCache with fxctl's KV tier backend
(or, with --engine sim, fxctl's emulator), locally or on the inventory's GPU hosts.

\b
  fxctl serve start|status|stop|logs|restart  (`fxctl serve [start options]` is `fxctl serve start`)
  fxctl serve monitor|top                     Prometheus/Grafana files; a live view
Exit codes: 0 ok, 1 a host failed (pre-flight, launch, readiness, tier check; with --check: start would
fail there), 2 bad input. Every command sent to a host is in the run journal (its path is printed).""")
@start_options
@click.pass_context
def command(ctx, **options):
    if ctx.invoked_subcommand is None:
        ctx.invoke(start_command, **options)
        return
    given = [name for name in options if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]
    if given:   # what the user wrote before the subcommand, whatever its value (a default typed out too)
        flags = ", ".join(next(p.opts[0] for p in ctx.command.params if p.name == name) for name in given)
        raise BadInput(f"{flags}: options go after the subcommand",
                       f"fxctl serve {ctx.invoked_subcommand} OPTIONS (fxctl serve {ctx.invoked_subcommand} --help "
                       "lists what it takes)")


def state_dir_for(where) -> str:
    from fxctl.serve.where import state_dir_for

    return state_dir_for(where)


@command.command("start", help=START_HELP)
@start_options
@click.pass_obj
def start_command(app, ready_timeout, dry_run, check, skip_preflight, no_install, hosts, local, **options):
    from fxctl.cli.serve_settings import settings_of
    from fxctl.remote.journal import RunJournal
    from fxctl.serve import deploy
    from fxctl.serve.lmcache_mode import lmcache_mode as lmcache_mode_of
    from fxctl.serve.lmcache_mode import mode_line
    from fxctl.serve.render import DryRun

    where, inventory = resolve_where(app, hosts, local)
    settings = settings_of(options, where, inventory)
    if dry_run:
        plans = deploy.dry_run(settings, where)
        line = mode_line(settings)
        emit({"dry_run": True, "lmcache_mode": lmcache_mode_of(settings), "why": line.lstrip("# "),
              "instances": [p.to_dict() for p in plans]}, app.output_format, text=DryRun(plans, line).text())
        return
    if check and (skip_preflight or no_install):
        raise BadInput("--check runs the pre-flight read only: it takes neither --skip-preflight nor --no-install")
    where.journal = RunJournal.new("serve-check" if check else "serve-start")
    if check:
        render_check(app, deploy.check(settings, where), deploy.dry_run(settings, where), mode_line(settings),
                     where.journal)
        return
    start = deploy.start
    if settings.pipeline_parallel > 1:   # one model across the hosts: a Ray cluster under vLLM
        from fxctl.serve import ray_deploy

        start = ray_deploy.start
    outcomes = start(settings, where, ready_timeout=ready_timeout, preflight=not skip_preflight,
                     install=not no_install)
    render_start(app, outcomes)
    click.echo(f"journal: {where.journal.path}", err=True)   # stderr: start's JSON is keyed by host


def host_entry(o) -> dict:
    """One host's outcome as start and start --check print it: ok, error, hint and its checks."""
    return {"ok": o.ok, "error": o.error, "hint": o.hint, "checks": o.value.checks if o.value else []}


def echo_checks(outcomes) -> None:
    """The pre-flight's checks of every host as one table (nothing when there are none)."""
    rows = [(c.host, c.check, c.status.value,
             c.detail + (f" (fix: {c.fix})" if c.fix and c.status != Status.OK else ""))
            for o in outcomes.values() if o.value for c in o.value.checks]
    if rows:
        click.echo(table(rows, ["host", "check", "result", "detail"]))
        click.echo()


def render_check(app, outcomes, plans, line: str, journal) -> None:
    """start --check: each host's checks, what start would launch, and that nothing was changed; exit 1
    when start would fail (a failed check or a host that did not answer)."""
    from fxctl.serve.render import DryRun

    failed = {host for host, o in outcomes.items()
              if not o.ok or any(c.status == Status.FAILED for c in o.value.checks)}
    data = {"check": True, "journal": str(journal.path), "would_fail": sorted(failed),
            "hosts": {host: host_entry(o) for host, o in outcomes.items()},
            "instances": [p.to_dict() for p in plans]}
    if app.output_format != "table":
        emit(data, app.output_format)
    else:
        echo_checks(outcomes)
        click.echo(DryRun(plans, line).text())
        click.echo("\n--check: nothing was changed on any host; start would "
                   + (f"FAIL on {', '.join(sorted(failed))}" if failed else "go ahead") + f"; journal: {journal.path}")
        report_failures(outcomes)
    if failed:
        raise click.exceptions.Exit(ExitCode.HOST_FAILED)


def render_start(app, outcomes) -> None:
    from fxctl.serve.deploy import PreflightFailed  # noqa: F401  (outcome errors carry its message)

    data = {host: {**host_entry(o), "instances": o.value.instances if o.value else [],
                   "endpoint": o.value.endpoint if o.value else None} for host, o in outcomes.items()}
    if app.output_format != "table":
        emit(data, app.output_format)
    else:
        echo_checks(outcomes)
        rows = [(i.host, i.unit, i.port, i.mode, ",".join(i.models), i.tier)
                for o in outcomes.values() if o.value for i in o.value.instances]
        if rows:
            click.echo(table(rows, ["host", "instance", "port", "run as", "models", "tier"]))
        for i in (i for o in outcomes.values() if o.value for i in o.value.instances if i.warm_up):
            click.echo(f"{i.host} {i.unit}: {i.warm_up}")
        for o in outcomes.values():
            if o.value and o.value.endpoint:
                click.echo(f"\nendpoint: {o.value.endpoint}  (the router: send requests here)")
        report_failures(outcomes)
    exit_on_failure(outcomes)


def report_failures(outcomes) -> None:
    for host, o in outcomes.items():
        if not o.ok:
            click.secho(f"{host}: FAILED: {o.error}", fg="red", err=True)
            if o.hint:
                click.echo(f"  hint: {o.hint}", err=True)


def exit_on_failure(outcomes) -> None:
    if any(not o.ok for o in outcomes.values()):
        raise click.exceptions.Exit(ExitCode.HOST_FAILED)


@command.command("status", help="""Each instance: running, ready (/health + /v1/models), port, models, pid, what it
served (vLLM's requests and prefix-cache hits; the router: requests per worker); then one row per host with its
engines' figures and fxctl's tier summed.""")
@where_options
@click.pass_obj
def status_command(app, name, hosts, local):
    from fxctl.serve import deploy
    from fxctl.serve.replica_metrics import host_summaries

    where, _ = resolve_where(app, hosts, local)
    outcomes = deploy.status(where, state_dir_for(where), name)
    statuses = [s for o in outcomes.values() if o.value for s in o.value]
    per_host = host_summaries(statuses)
    data = {"instances": [dict(vars(s), state=s.state) for s in statuses], "hosts": per_host,
            "errors": {h: o.error for h, o in outcomes.items() if not o.ok}}
    rows = [(s.host, s.unit, s.state, s.port, s.pid or "", s.mode, ",".join(s.models),
             tier_cell(s.tier) or served_cell(s.load) or cluster_cell(s.cluster), s.log_path) for s in statuses]
    emit(data, app.output_format, rows=rows, headers=["host", "instance", "state", "port", "pid", "run as",
                                                      "models", "served / fxctl tier (their /metrics)", "log"],
         text=None if statuses else "no serving instances recorded")
    if app.output_format == "table" and per_host:
        click.echo()
        click.echo(table([(h["host"], f"{h['ready']}/{h['engines']}", served_cell(h["served"]), tier_cell(h["tier"]))
                          for h in per_host], ["host", "engines ready", "served (summed)", "fxctl tier (summed)"]))
    if app.output_format == "table":
        report_failures(outcomes)
    exit_on_failure(outcomes)


def cluster_cell(cluster: dict | None) -> str:
    """A Ray head: 'Ray: 2 nodes, GPU 2/2 in use' (GPU: vLLM's worker slots)."""
    if not cluster:
        return ""
    used = ", ".join(f"{name} {u:g}/{t:g} in use" for name, (u, t) in sorted(cluster["resources"].items())
                     if name in ("GPU", "CPU"))
    return f"Ray: {cluster['nodes']} nodes" + (f", {used}" if used else "")


def served_cell(load: dict | None) -> str:
    """'12 requests, prefix cache 40 % of 9.1k tokens, connector 100 %' or the router's per-worker spread."""
    if not load:
        return ""
    if "workers" in load:
        return "requests " + ", ".join(f"{w.split('//')[-1]}: {int(c['requests'])}" + ("" if c["healthy"] else
                                                                                       " (unhealthy)")
                                       for w, c in sorted(load["workers"].items()))
    from fxctl.serve.replica_metrics import hit_rates

    rates = hit_rates(load)
    parts = [f"{int(load['requests'])} requests"]
    if rates["prefix_hit_rate"] is not None:
        parts.append(f"prefix cache {100 * rates['prefix_hit_rate']:.0f} % of {load['prefix_queries'] / 1e3:.1f}k "
                     "tokens")
    if rates["external_hit_rate"] is not None:
        parts.append(f"connector {100 * rates['external_hit_rate']:.0f} % of {load['external_queries'] / 1e3:.1f}k")
    return ", ".join(parts)


def tier_cell(tier: dict | None) -> str:
    """'L1 12/40 hits, L2 28/28 hits, 1.2 GB of 2.0 GB' from a tier summary ('' when none was read)."""
    if not tier:
        return ""
    parts = [f"{level.upper()} {int(t['hits'])}/{int(t['hits'] + t['misses'])} hits"
             for level, t in sorted(tier.items())]
    l2 = tier.get("l2") or {}
    if l2.get("max_capacity_bytes"):
        parts.append(f"L2 {l2['usage_bytes'] / 1e9:.2f} of {l2['max_capacity_bytes'] / 1e9:.1f} GB")
    errors = sum(int(t.get("errors", 0)) for t in tier.values())
    return ", ".join(parts + ([f"{errors} L2 errors"] if errors else []))


@command.command("stop", help="Stop the instances (the whole unit or process group) and check none is left.")
@where_options
@click.pass_obj
def stop_command(app, name, hosts, local):
    from fxctl.serve import deploy

    where, _ = resolve_where(app, hosts, local)
    outcomes = deploy.stop(where, state_dir_for(where), name)
    stopped = [s for o in outcomes.values() if o.value for s in o.value]
    emit({"stopped": stopped, "errors": {h: o.error for h, o in outcomes.items() if not o.ok}}, app.output_format,
         rows=[(s["host"], s["unit"], "stopped" if s["was_running"] else "was not running") for s in stopped],
         headers=["host", "instance", "result"], text=None if stopped else "no serving instances recorded")
    if app.output_format == "table":
        report_failures(outcomes)
    exit_on_failure(outcomes)


@command.command("logs", help="The last lines of each instance's log.")
@where_options
@click.option("-n", "--lines", type=click.IntRange(1, 100000), default=50, show_default=True)
@click.pass_obj
def logs_command(app, name, hosts, local, lines):
    from fxctl.serve import deploy

    where, _ = resolve_where(app, hosts, local)
    outcomes = deploy.logs(where, state_dir_for(where), name, lines)
    items = [i for o in outcomes.values() if o.value for i in o.value]
    text = "\n".join(f"==> {i['host']}: {i['unit']} ({i['log_path']}) <==\n{i['text'].rstrip()}" for i in items)
    emit({"logs": items}, app.output_format, text=text or "no serving instances recorded")
    if app.output_format == "table":
        report_failures(outcomes)
    exit_on_failure(outcomes)


@command.command("restart", help="Stop and start again what was started (same command lines), wait until ready.")
@where_options
@click.option("--ready-timeout", type=click.FloatRange(min=1), default=600, show_default=True)
@click.pass_obj
def restart_command(app, name, hosts, local, ready_timeout):
    from fxctl.serve import deploy

    where, _ = resolve_where(app, hosts, local)
    render_start(app, deploy.restart(where, state_dir_for(where), name, ready_timeout=ready_timeout))


@command.command("forward", help="""Forward a local port to an instance on a host (bound to its 127.0.0.1)
through fxctl's SSH connection, until Ctrl-C: point an OpenAI client at http://127.0.0.1:LOCAL/v1.""")
@click.option("--host", required=True, help="Inventory host that runs the instance.")
@click.option("--name", default="main", show_default=True, callback=name_option, help="Deployment name.")
@click.option("--index", type=click.IntRange(0, 63), default=0, show_default=True, help="Instance number.")
@click.option("--local-port", type=click.IntRange(0, 65535), default=None,
              help="Local port (default: the instance's port; 0: any free one).")
@click.pass_obj
def forward_command(app, host, name, index, local_port):
    import sys
    import time

    from fxctl.remote.session import open_session
    from fxctl.serve.forward import PortForward
    from fxctl.serve.launch import saved_plans
    from fxctl.serve.roles import Role
    from fxctl.serve.settings import REMOTE_STATE

    where, _ = resolve_where(app, (host,), False)
    with open_session(where.hosts[0]) as session:
        plans = [p for p, _ in saved_plans(session, REMOTE_STATE, name)
                 if p.role == Role.ENGINE and p.index == index]
        if not plans:
            raise BadInput(f"{host}: no instance {index} of deployment {name!r}", "fxctl serve status")
        session.connection.open()
        fwd = PortForward(session.connection.client.get_transport(), plans[0].port,
                          plans[0].port if local_port is None else local_port)
        emit({"local": f"http://127.0.0.1:{fwd.local_port}", "host": host, "remote_port": plans[0].port},
             app.output_format, text=f"forwarding http://127.0.0.1:{fwd.local_port} -> {host}:127.0.0.1:"
             f"{plans[0].port} ({plans[0].unit}); Ctrl-C to stop")
        sys.stdout.flush()  # a script reading the address through a pipe gets it now
        try:
            while fwd.thread.is_alive() and session.connection.is_connected:
                time.sleep(0.5)
        finally:
            fwd.close()


def _register_env_commands() -> None:
    from fxctl.cli.serve_env_cmd import compat_command, install_env_command, make_model_command

    command.add_command(install_env_command)
    command.add_command(make_model_command)
    command.add_command(compat_command)
    from fxctl.cli.serve_monitor_cmd import monitor_command, top_command

    command.add_command(monitor_command)
    command.add_command(top_command)


_register_env_commands()
