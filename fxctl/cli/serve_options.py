"""`fxctl serve`'s shared options: where (--local, --host, --name), a deployment's settings (settings_options,
resolved by fxctl.cli.serve_settings) and what only a start takes (start_options)."""

from __future__ import annotations

import click

from fxctl.cli.option_model import click_options
from fxctl.serve.overrides import ServeOverrides


def name_option(_ctx, _param, value):
    from fxctl.serve.settings import NAME_RE

    if value is not None and not NAME_RE.fullmatch(value):
        raise click.BadParameter(f"{value!r}: lowercase letters, digits and '-', at most 40")
    return value


def where_options(func):
    func = click.option("--name", default=None, callback=name_option,
                        help="Deployment name (default: all for status/stop/logs; "
                        "'main' for start).")(func)
    func = click.option("--host", "hosts", multiple=True, help="Inventory host (repeatable); default: "
                        "serve.hosts of the inventory.")(func)
    func = click.option("--local", "local", is_flag=True, help="This machine, not the inventory's hosts.")(func)
    return func


def settings_options(func):
    """The options that resolve a deployment's settings (fxctl.serve.overrides.ServeOverrides, resolved by
    fxctl.cli.serve_settings), with where it runs."""
    return where_options(click_options(ServeOverrides)(func))


def start_options(func):
    """settings_options and what only a start takes."""
    options = [
        click.option("--ready-timeout", type=click.FloatRange(min=1), default=600, show_default=True,
                     help="Seconds to wait for /health and /v1/models."),
        click.option("--dry-run", is_flag=True, help="Print what would run, where (env, argv, LMCache YAML); "
                     "run nothing."),
        click.option("--check", is_flag=True, help="Plan: run the pre-flight on each host read only and print "
                     "what start would install and launch; change nothing. Exit 1 when start would fail."),
        click.option("--skip-preflight", is_flag=True, help="Launch without the pre-flight checks."),
        click.option("--no-install", is_flag=True, help="Pre-flight reports a missing or stale fxctl instead "
                     "of pushing fxctl's wheel."),
    ]
    for option in reversed(options):
        func = option(func)
    return settings_options(func)


def resolve_where(app, hosts, local):
    from fxctl.serve.where import select

    inventory = None if local or (not hosts and not app.inventory_path) else app.inventory()
    return select(inventory, hosts, local), inventory
