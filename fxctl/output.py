"""Rendering results for people (tables) and for scripts (json, yaml): one place, used by every command."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

FORMATS = ("table", "json", "yaml")


def to_plain(value: Any) -> Any:
    """Turn dataclasses, enums, paths and tuples into JSON-compatible values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    if hasattr(value, "to_dict"):
        return to_plain(value.to_dict())
    return value


def dumps(data: Any, fmt: str) -> str:
    plain = to_plain(data)
    if fmt == "json":
        return json.dumps(plain, indent=2, sort_keys=False)
    if fmt == "yaml":
        import yaml  # here, not at import: `fxctl --version` loads neither yaml nor tabulate

        return yaml.safe_dump(plain, sort_keys=False).rstrip("\n")
    raise ValueError(f"not a structured format: {fmt}")


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    from tabulate import tabulate

    return tabulate(list(rows), headers=list(headers), tablefmt="simple", disable_numparse=True)


def emit(data: Any, fmt: str, *, rows: Iterable[Sequence[Any]] | None = None,
         headers: Sequence[str] | None = None, text: str | None = None) -> None:
    """Print `data` as json/yaml, or as a table (rows + headers) or free text for fmt == 'table'."""
    if fmt in ("json", "yaml"):
        click.echo(dumps(data, fmt))
        return
    if rows is not None and headers is not None:
        click.echo(table(rows, headers))
    if text:
        click.echo(text)
