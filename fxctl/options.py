"""Options declared once: a dataclass field carries its default and, in its metadata, how a command line
gives it (flag, help, allowed values or range). fxctl.cli.option_model turns such a dataclass into click
options; the library that owns the dataclass imports no click.

    @dataclass
    class TuneOptions:
        start: int = option("--start", "First concurrency tried.", default=4, min=1)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cli:
    """How one field is given on the command line."""

    flag: str
    help: str = ""
    choices: tuple[str, ...] | None = None
    min: float | None = None
    max: float | None = None
    is_flag: bool = False
    multiple: bool = False
    parse: Callable[[str], Any] | None = None   # the text -> the field's value ("1,2,4" -> [1, 2, 4])
    show: str | None = None                     # the default as --help shows it (default: the field's default)
    hidden: bool = False                        # not in --help (options for tests)


def option(flag: str, help: str = "", *, default: Any = MISSING, default_factory: Any = MISSING, **cli) -> Any:
    """A dataclass field with its command-line spelling; its default is the one default there is."""
    extra = {"default": default} if default is not MISSING else {}
    if default_factory is not MISSING:
        extra["default_factory"] = default_factory
    return field(metadata={"cli": Cli(flag, help, **cli)}, **extra)


def int_list(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; ValueError naming what is not a whole number."""
    values = []
    for part in text.split(","):
        if not part.strip().isdigit():
            raise ValueError(f"{part.strip()!r} in {text!r} is not a whole number (a list like 1,2,4)")
        values.append(int(part))
    return values
