"""A command group whose feature is not built yet: it says so and exits non-zero; it never pretends."""

from __future__ import annotations

import click

from fxctl.errors import NotImplementedYet


def not_implemented_group(name: str, summary: str, issue: int) -> click.Command:
    @click.command(name=name, context_settings={"ignore_unknown_options": True},
                   help=f"{summary}\n\nNot implemented yet (issue {issue}).")
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args):
        raise NotImplementedYet(f"'fxctl {name}' is not implemented yet",
                                f"tracked as issue {issue}; see README.md for what works today")

    return command
