"""Field types for the inventory's shapes: pydantic types whose errors read like the validators'.

Each refusal is a `PydanticCustomError` of type "fx" whose message is final ("'x;y' must be an IP address
or a DNS host name"); fxctl.inventory.problems turns it into `file:line: key: message`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, StrictBool, StrictInt, StrictStr
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError

from fxctl.inventory import validators as v

__all__ = ["shape", "checked", "between", "fraction", "one_of", "unique", "items", "size", "Bool", "Str"]

Bool = StrictBool
Str = StrictStr

# One decorator for every shape: frozen, unknown keys refused, a YAML key may be an alias of the field.
shape = functools.partial(dataclass, frozen=True, kw_only=True,
                          config=ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True))


def refuse(message: str, at: int | str | tuple | None = None) -> PydanticCustomError:
    """A refusal with its final wording; `at` is a list index or key (or a tuple of them) below the field it
    is about."""
    ctx: dict[str, Any] = {"message": message}
    if at is not None:
        ctx["at"] = at
    return PydanticCustomError("fx", "{message}", ctx)


def checked(validator: Callable[[Any], str | None], base: Any = StrictStr) -> Any:
    """A value of `base` that `validator` accepts (it returns None, or what is allowed)."""
    def check(value):
        if reason := validator(value):
            raise refuse(f"{value!r} {reason}")
        return value
    return Annotated[base, AfterValidator(check)]


def between(low: int, high: int) -> Any:
    def check(value):
        if not low <= value <= high:
            raise refuse(f"must be between {low} and {high}, got {value}")
        return value
    return Annotated[StrictInt, AfterValidator(check)]


def fraction() -> Any:
    """A number in (0, 1], such as 0.9 (true and false are not numbers here)."""
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse(f"must be a fraction in (0, 1], got {value!r}")
        if not 0 < value <= 1:
            raise refuse(f"must be a fraction in (0, 1], got {value}")
        return value
    return Annotated[Any, AfterValidator(check)]


def one_of(*choices: Any) -> Any:
    def check(value):
        if not any(value == c and type(value) is type(c) for c in choices):  # 1.0 and true are not 1
            raise refuse(f"{value!r} is not allowed; one of: {', '.join(str(c) for c in choices)}")
        return value
    return Annotated[Any, AfterValidator(check)]


def _unique(items: tuple) -> tuple:
    seen: set = set()
    for index, item in enumerate(items):
        if item in seen:
            raise refuse(f"{item!r} is listed twice", at=index)
        seen.add(item)
    return items


def items(item: Any, min_items: int = 0) -> Any:
    """A list (read as a tuple) of at least `min_items`."""
    def check(value):
        if len(value) < min_items:
            raise refuse(f"needs at least {min_items} item(s)")
        return value
    return Annotated[tuple[item, ...], AfterValidator(check)]


def unique(item: Any, min_items: int = 0) -> Any:
    """A list (read as a tuple) of distinct items."""
    return Annotated[items(item, min_items), AfterValidator(_unique)]


def size(validator: Callable[[Any], str | None] = v.size) -> Any:
    """A size given as bytes or with a binary unit ('64K', '2TiB'), read as bytes."""
    def to_bytes(value):
        if reason := validator(value):
            raise refuse(f"{value!r} {reason}")
        return v.parse_size(value)
    return Annotated[Any, AfterValidator(to_bytes)]
