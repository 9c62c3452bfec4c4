"""`fxctl inventory`: check, show, trust a host key, ping hosts."""

from __future__ import annotations

from pathlib import Path

import click

from fxctl.errors import BadInput, ExitCode
from fxctl.output import emit


@click.group(name="inventory")
def command():
    """Check and show the inventory; trust host keys; test SSH to hosts."""


def _path(app) -> Path:
    if not app.inventory_path:
        raise BadInput("no inventory given", "pass -i FILE or set FXCTL_INVENTORY (see examples/inventory.yaml)")
    return Path(app.inventory_path)


@command.command()
@click.pass_obj
def check(app):
    """Validate the inventory and run nothing: every problem with file, line and key (exit 2)."""
    from fxctl.inventory import summary

    result = summary(_path(app))
    lines = [str(p) for p in result["problems"]]
    text = (f"{result['file']}: valid ({result['hosts']} hosts, {result['arrays']} arrays)" if result["valid"]
            else f"{result['file']}: {len(lines)} problem(s)\n" + "\n".join(f"  {line}" for line in lines))
    emit(result, app.output_format, text=text)
    if not result["valid"]:
        raise click.exceptions.Exit(ExitCode.BAD_INPUT)


@command.command()
@click.pass_obj
def show(app):
    """The inventory as fxctl reads it, with defaults filled in."""
    inventory = app.inventory()
    rows = [[h.name, f"{h.user}@{h.address}:{h.port}", ",".join(h.roles), "sudo" if h.sudo else "",
             "pinned" if h.host_key else (h.known_hosts or "~/.ssh/known_hosts")] for h in inventory.hosts.values()]
    arrays = "\n".join(f"array {a.name}: {a.target} -> {','.join(a.initiators)} over {a.transport} "
                       f"{' + '.join(p.label for p in a.listen_paths)}, {len(a.drives)} drives, {a.mount}"
                       for a in inventory.arrays)
    emit(inventory, app.output_format, rows=rows, headers=["host", "ssh", "roles", "sudo", "host key"],
         text=arrays or None)


@command.command()
@click.argument("hosts", nargs=-1)
@click.option("--yes", is_flag=True, help="Trust without asking (only after checking the fingerprint).")
@click.pass_obj
def trust(app, hosts, yes):
    """Add the host keys of HOSTS to their known_hosts file, after showing each fingerprint.

    Trusting a key is an explicit choice: fxctl never adds one on its own.
    """
    from fxctl.remote import inventory_ops  # the SSH stack: imported by the commands that connect

    inventory = app.inventory()
    for host in inventory.select(list(hosts) or None):
        offer = inventory_ops.offered_key(host)
        if offer.already_known:
            click.echo(f"{host.name}: already trusted ({offer.fingerprint})")
            continue
        if host.host_key:
            click.echo(f"{host.name}: key is pinned in the inventory; nothing to trust")
            continue
        prompt = f"{host.name} ({host.address}:{host.port}) offers {offer.key_type} {offer.fingerprint}. Trust it?"
        if yes or click.confirm(prompt, default=False):
            inventory_ops.trust(host, offer)
            click.echo(f"{host.name}: added to {offer.known_hosts}")
        else:
            raise click.exceptions.Exit(ExitCode.HOST_FAILED)


@command.command()
@click.argument("hosts", nargs=-1)
@click.pass_obj
def ping(app, hosts):
    """Connect to each host (verifying its key) and run `true`: reachability per host."""
    from fxctl.remote import inventory_ops

    inventory = app.inventory()
    outcomes = inventory_ops.ping(inventory.select(list(hosts) or None))
    rows = [[o.host, "ok" if o.ok else "failed", f"{o.duration_s:.2f}s", o.error or ""] for o in outcomes]
    emit(outcomes, app.output_format, rows=rows, headers=["host", "status", "time", "error"])
    if not all(o.ok for o in outcomes):
        raise click.exceptions.Exit(ExitCode.HOST_FAILED)
