"""pydantic's validation errors as `file:line: key: message` problems, through the line-tracking reader."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from pydantic import ValidationError

from fxctl.inventory.source import Document, Problem

_TYPES = {"int_type": "an integer", "int_parsing": "an integer", "bool_type": "true or false",
          "bool_parsing": "true or false", "string_type": "a string", "list_type": "a list",
          "tuple_type": "a list", "dict_type": "a mapping", "dataclass_type": "a mapping",
          "dataclass_args_type": "a mapping", "model_type": "a mapping"}


def type_name(value: Any) -> str:
    if value is None:
        return "empty"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def problems_of(error: ValidationError, doc: Document, root: type) -> list[Problem]:
    """One problem per pydantic error, at the line of its key (or of the nearest key that exists)."""
    problems = []
    for item in error.errors(include_url=False):
        loc = tuple(part for part in item["loc"] if part != "[key]")
        kind, ctx = item["type"], item.get("ctx") or {}
        if kind == "fx":
            message = ctx["message"]
            if "at" in ctx:
                at = ctx["at"]
                loc += tuple(at) if isinstance(at, tuple | list) else (at,)
        elif kind in ("missing", "missing_argument", "missing_keyword_only_argument"):
            loc, message = loc[:-1], f"missing required key '{loc[-1]}'"
        elif kind in ("extra_forbidden", "unexpected_keyword_argument", "invalid_key"):
            message = f"unknown key; allowed here: {', '.join(allowed_keys(root, loc[:-1]))}"
        elif kind in _TYPES:
            message = f"must be {_TYPES[kind]}, got {type_name(item['input'])}"
        elif kind == "too_short":
            message = f"needs at least {ctx.get('min_length')} item(s)"
        else:
            message = item["msg"]
        problems.append(doc.problem(loc, message))
    return problems


def allowed_keys(root: type, loc: tuple) -> list[str]:
    """The keys a file may write at `loc`: the fields (or their YAML aliases) of the shape found there."""
    shape = _shape_at(root, loc)
    if shape is None:
        return []
    return [_key_of(f) for f in dataclasses.fields(shape) if f.init]


def _key_of(field: dataclasses.Field) -> str:
    alias = getattr(field.default, "validation_alias", None)
    return alias if isinstance(alias, str) else field.name


def _shape_at(kind: Any, loc: tuple) -> type | None:
    kind = _unwrap(kind)
    for part in loc:
        if dataclasses.is_dataclass(kind):
            by_key = {_key_of(f): f.name for f in dataclasses.fields(kind)}
            kind = _unwrap(typing.get_type_hints(kind, include_extras=True).get(by_key.get(part, part)))
        elif typing.get_origin(kind) is dict:
            kind = _unwrap(typing.get_args(kind)[1])
        elif typing.get_origin(kind) in (list, tuple):
            kind = _unwrap(typing.get_args(kind)[0])
        else:
            return None
    return kind if dataclasses.is_dataclass(kind) else None


def _unwrap(kind: Any) -> Any:
    """The type inside Annotated[...] and `X | None`."""
    while True:
        origin = typing.get_origin(kind)
        if origin is typing.Annotated:
            kind = typing.get_args(kind)[0]
        elif origin in (typing.Union, types.UnionType):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        else:
            return kind
