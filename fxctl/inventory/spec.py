"""A small declarative schema: each spec checks a value at a key path and records every problem."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fxctl.inventory.source import Document, Problem

_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number",
               list: "a list", dict: "a mapping"}


def _type_name(value: Any) -> str:
    if value is None:
        return "empty"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


class Spec:
    def check(self, doc: Document, value: Any, path: tuple, problems: list[Problem]) -> None:
        raise NotImplementedError


@dataclass
class Scalar(Spec):
    """A value of one Python type, optionally passed through a validator (None == fine)."""

    kind: type
    validator: Callable[[Any], "str | None"] | None = None
    minimum: float | None = None
    maximum: float | None = None

    def check(self, doc, value, path, problems):
        ok_type = isinstance(value, self.kind) and not (self.kind is not bool and isinstance(value, bool))
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok_type = True
        if not ok_type:
            problems.append(doc.problem(path, f"must be {_TYPE_NAMES[self.kind]}, got {_type_name(value)}"))
            return
        if self.minimum is not None and value < self.minimum or \
                self.maximum is not None and value > self.maximum:
            problems.append(doc.problem(path, f"must be between {self.minimum} and {self.maximum}, got {value}"))
            return
        if self.validator and (reason := self.validator(value)):
            problems.append(doc.problem(path, f"{value!r} {reason}"))


@dataclass
class Checked(Spec):
    """Any type, judged only by the validator (e.g. sizes given as int or '64K')."""

    validator: Callable[[Any], "str | None"]

    def check(self, doc, value, path, problems):
        if reason := self.validator(value):
            problems.append(doc.problem(path, f"{value!r} {reason}"))


@dataclass
class OneOf(Spec):
    choices: tuple

    def check(self, doc, value, path, problems):
        if value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            problems.append(doc.problem(path, f"{value!r} is not allowed; one of: {allowed}"))


@dataclass
class ListOf(Spec):
    item: Spec
    min_items: int = 0
    unique: bool = False

    def check(self, doc, value, path, problems):
        if not isinstance(value, list):
            problems.append(doc.problem(path, f"must be a list, got {_type_name(value)}"))
            return
        if len(value) < self.min_items:
            problems.append(doc.problem(path, f"needs at least {self.min_items} item(s)"))
        seen: dict[Any, int] = {}
        for index, item in enumerate(value):
            self.item.check(doc, item, path + (index,), problems)
            if self.unique and isinstance(item, (str, int)):
                if item in seen:
                    problems.append(doc.problem(path + (index,), f"{item!r} is listed twice"))
                seen[item] = index


@dataclass
class MapOf(Spec):
    key: Spec
    value: Spec

    def check(self, doc, value, path, problems):
        if not isinstance(value, dict):
            problems.append(doc.problem(path, f"must be a mapping, got {_type_name(value)}"))
            return
        for key, item in value.items():
            self.key.check(doc, key, path + (key,), problems)
            self.value.check(doc, item, path + (key,), problems)


@dataclass
class Field:
    spec: Spec
    required: bool = False
    doc: str = ""


@dataclass
class Struct(Spec):
    fields: dict[str, Field]
    exclusive: tuple[tuple[str, ...], ...] = field(default_factory=tuple)  # exactly one of these

    def check(self, doc, value, path, problems):
        if not isinstance(value, dict):
            problems.append(doc.problem(path, f"must be a mapping, got {_type_name(value)}"))
            return
        allowed = ", ".join(self.fields)
        for key in value:
            if key not in self.fields:
                problems.append(doc.problem(path + (key,), f"unknown key; allowed here: {allowed}"))
        for name, spec_field in self.fields.items():
            if name in value:
                spec_field.spec.check(doc, value[name], path + (name,), problems)
            elif spec_field.required:
                problems.append(doc.problem(path, f"missing required key '{name}'"))
        for group in self.exclusive:
            present = [k for k in group if k in value]
            if len(present) != 1:
                problems.append(doc.problem(path, f"give exactly one of: {', '.join(group)}"
                                            + (f" (found {', '.join(present)})" if present else "")))
