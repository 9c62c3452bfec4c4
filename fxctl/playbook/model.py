"""Playbook files: one shape per section (pydantic, as the inventory), problems with file, line and key."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from fxctl.errors import BadInput
from fxctl.inventory.fields import Bool, Str, between, checked, items, one_of, refuse, shape
from fxctl.inventory.problems import problems_of
from fxctl.inventory.source import Document, SyntaxProblem, load_yaml_file
from fxctl.inventory.validators import name as valid_name
from fxctl.playbook.measures import OPS, REDUCERS, parse_path

VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _path_ok(value: Any) -> str | None:
    try:
        parse_path(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise refuse("must be a string or number")
    return value


Scalar = Annotated[Any, AfterValidator(_scalar)]


@shape
class Check:
    measure: Str                         # what the number means, shown in the report
    path: checked(_path_ok)              # where in the stage's JSON output
    op: one_of(*OPS)
    value: Any
    reduce: one_of(*REDUCERS) = "first"
    equals: Any = None
    unit: Str = ""


@shape
class Gate:
    name: Str
    checks: items(Check, min_items=1)


@shape
class Stage:
    name: checked(valid_name)
    fxctl: items(Scalar, min_items=1)    # the fxctl command line, without `fxctl`
    description: Str = ""
    inventory: Str | None = None         # inventory for this stage (default: the run's)
    json: Bool = True                    # add -o json; JSON output is always kept for the gate
    timeout: between(1, 86400) = 3600
    ok_codes: tuple[between(0, 255), ...] = (0,)
    gate: Gate | None = None

    argv = property(lambda self: tuple(str(a) for a in self.fxctl))
    checks = property(lambda self: self.gate.checks if self.gate else ())
    gate_name = property(lambda self: self.gate.name if self.gate else None)


@shape
class PlaybookFile:
    version: one_of(1)
    name: checked(valid_name)
    description: Str = ""
    vars: dict[checked(valid_name), Scalar] = Field(default_factory=dict)
    stages: items(Stage, min_items=1)


@dataclass(frozen=True)
class Playbook:
    """A playbook with its variables substituted."""

    path: Path
    name: str
    description: str
    stages: tuple[Stage, ...]
    variables: dict = field(default_factory=dict)


def substitute(text: str, variables: dict, where: str) -> str:
    def one(match):
        key = match.group(1)
        if key not in variables:
            raise BadInput(f"{where}: ${{{key}}} is not defined", f"defined: {', '.join(sorted(variables))}")
        return str(variables[key])
    return VAR.sub(one, text)


def coerce(value: Any) -> Any:
    """A threshold written as '${var}' becomes a number or boolean again after substitution."""
    if not isinstance(value, str):
        return value
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def resolve_variables(variables: dict, where: str) -> dict:
    """Variables may use each other and the built-ins (${run_dir}); resolve until stable."""
    resolved = {k: str(v) if not isinstance(v, str) else v for k, v in variables.items()}
    for _ in range(len(resolved) + 1):
        changed = False
        for key, value in resolved.items():
            new = substitute(value, resolved, f"{where}: vars.{key}") if VAR.search(value) else value
            changed |= new != value
            resolved[key] = new
        if not changed:
            return resolved
    raise BadInput(f"{where}: variables refer to each other in a cycle")


def load_playbook(path: Path, overrides: dict[str, str] | None = None, builtins: dict | None = None) -> Playbook:
    try:
        doc = load_yaml_file(path)
    except SyntaxProblem as exc:
        raise BadInput(str(exc.problem)) from None
    problems = [doc.problem(where, f"duplicate key (also on an earlier line); line {line} wins")
                for where, line in doc.duplicates]
    try:
        book = TypeAdapter(PlaybookFile).validate_python(doc.data)
    except ValidationError as exc:
        problems += problems_of(exc, doc, PlaybookFile)
    stages = doc.data.get("stages") if isinstance(doc.data, dict) else None
    names = [s.get("name") for s in stages if isinstance(s, dict)] if isinstance(stages, list) else []
    for index, stage_name in enumerate(names):
        if stage_name in names[:index]:
            problems.append(doc.problem(("stages", index, "name"), f"stage {stage_name!r} is defined twice"))
    if problems:
        problems.sort(key=lambda p: (p.line or 0, p.key))
        raise BadInput(f"{path}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems),
                       "fix the playbook; see playbooks/ for examples")
    variables = resolve_variables({**(builtins or {}), **book.vars, **(overrides or {})}, str(path))
    return build(path, doc, book, variables)


def build(path: Path, doc: Document, book: PlaybookFile, variables: dict) -> Playbook:
    """The playbook with ${var} substituted in command lines, inventories and gate checks."""
    stages = []
    for index, stage in enumerate(book.stages):
        where = f"{path}:{doc.line_of(('stages', index))}: stage {stage.name}"
        sub = lambda v, where=where: coerce(substitute(v, variables, where)) if isinstance(v, str) else v  # noqa: E731
        gate = stage.gate and replace(stage.gate, checks=tuple(
            replace(c, measure=substitute(c.measure, variables, where), path=substitute(c.path, variables, where),
                    value=sub(c.value), equals=sub(c.equals)) for c in stage.gate.checks))
        stages.append(replace(
            stage, fxctl=tuple(substitute(str(a), variables, where) for a in stage.fxctl), gate=gate,
            inventory=substitute(stage.inventory, variables, where) if stage.inventory else None))
    return Playbook(path, book.name, book.description, tuple(stages), variables)
