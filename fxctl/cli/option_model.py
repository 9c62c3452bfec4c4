"""click options from an options dataclass (fxctl.options): one field, one declaration of its type, default
and help. Every generated option defaults to "not given" (None), so the dataclass's own default applies and
--help shows it; `given` picks what the user set."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from types import UnionType
from typing import Any

import click

from fxctl.options import Cli


def cli_fields(model) -> list[tuple[dataclasses.Field, Cli]]:
    return [(f, f.metadata["cli"]) for f in dataclasses.fields(model) if "cli" in f.metadata]


def click_options(model) -> Callable:
    """A decorator: one click option per field of `model` that has a command-line spelling, in field order."""
    hints = typing.get_type_hints(model)

    def decorate(func):
        for f, spec in reversed(cli_fields(model)):
            func = click.option(spec.flag, f.name, **option_kwargs(f, spec, hints[f.name]))(func)
        return func
    return decorate


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def option_kwargs(f: dataclasses.Field, spec: Cli, hint: Any) -> dict:
    if spec.is_flag:
        return {"is_flag": True, "default": None, "help": spec.help, "hidden": spec.hidden}
    default = default_of(f)
    shown = spec.show or (None if default in (None, [], ()) else str(default))
    kwargs: dict[str, Any] = {"default": None, "type": click_type(spec, hint), "multiple": spec.multiple,
                              "hidden": spec.hidden,
                              "help": spec.help + (f"  [default: {shown}]" if shown is not None else "")}
    if spec.parse is not None:
        kwargs["callback"] = parsed(spec.parse)
    return kwargs


def parsed(parse: Callable[[str], Any]) -> Callable:
    def callback(_ctx, _param, value):
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return callback


def click_type(spec: Cli, hint: Any) -> Any:
    if spec.choices:
        return click.Choice(spec.choices)
    if spec.parse is not None:
        return str
    base = scalar(hint)
    if base is int:
        return click.IntRange(spec.min, spec.max) if (spec.min, spec.max) != (None, None) else int
    if base is float:
        return click.FloatRange(spec.min, spec.max) if (spec.min, spec.max) != (None, None) else float
    return str


def scalar(hint: Any) -> Any:
    """int for int, int | None and list[int]; the type a single value on the command line has."""
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) in (list, tuple):
        hint = typing.get_args(hint)[0]
    return hint


def given(model, values: dict) -> dict:
    """The fields the user set on the command line (None, an unused flag and no repeats are 'not given')."""
    names = {f.name for f, _ in cli_fields(model)}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()
            if k in names and v is not None and v != ()}
