"""Options shared by `fxctl lab` and `fxctl lab fault` (one declaration; both command modules import it)."""

from __future__ import annotations

import click

from fxctl.lab.paths import DEFAULT_LAB_NAME, check_lab_name


def name_option(func):
    return click.option("--name", "lab_name", default=DEFAULT_LAB_NAME, show_default=True,
                        envvar="FXCTL_LAB_NAME", show_envvar=True, callback=lambda _c, _p, v: check_lab_name(v),
                        help="Lab name: several labs can run side by side.")(func)
