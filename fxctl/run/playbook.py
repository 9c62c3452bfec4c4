"""Playbook files: YAML validated with the inventory's schema machinery (file, line, key, what's allowed)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fxctl.errors import BadInput
from fxctl.inventory.source import Document, Problem, SyntaxProblem, load_yaml_file
from fxctl.inventory.spec import Checked, Field, ListOf, MapOf, OneOf, Scalar, Struct
from fxctl.inventory.validators import name as valid_name
from fxctl.run.measures import OPS, REDUCERS, parse_path

VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _path_ok(value: Any) -> str | None:
    try:
        parse_path(str(value))
    except ValueError as exc:
        return str(exc)
    return None


CHECK = Struct({
    "measure": Field(Scalar(str), required=True, doc="what the number means, shown in the report"),
    "path": Field(Scalar(str, _path_ok), required=True, doc="where in the stage's JSON output"),
    "reduce": Field(OneOf(tuple(REDUCERS))),
    "equals": Field(Checked(lambda v: None)),
    "op": Field(OneOf(tuple(OPS)), required=True),
    "value": Field(Checked(lambda v: None), required=True),
    "unit": Field(Scalar(str)),
})

STAGE = Struct({
    "name": Field(Scalar(str, valid_name), required=True),
    "description": Field(Scalar(str)),
    "fxctl": Field(ListOf(Checked(lambda v: None if isinstance(v, (str, int, float)) else "must be a string"),
                          min_items=1), required=True, doc="the fxctl command line, without `fxctl`"),
    "inventory": Field(Scalar(str), doc="inventory for this stage (default: the run's)"),
    "json": Field(Scalar(bool), doc="add -o json (default true); JSON output is always kept for the gate"),
    "timeout": Field(Scalar(int, minimum=1, maximum=86400)),
    "ok_codes": Field(ListOf(Scalar(int, minimum=0, maximum=255))),
    "gate": Field(Struct({"name": Field(Scalar(str), required=True),
                          "checks": Field(ListOf(CHECK, min_items=1), required=True)})),
})

PLAYBOOK = Struct({
    "version": Field(OneOf((1,)), required=True),
    "name": Field(Scalar(str, valid_name), required=True),
    "description": Field(Scalar(str)),
    "vars": Field(MapOf(Scalar(str, valid_name), Checked(lambda v: None if isinstance(v, (str, int, float))
                                                          else "must be a string or number"))),
    "stages": Field(ListOf(STAGE, min_items=1), required=True),
})


@dataclass(frozen=True)
class Check:
    measure: str
    path: str
    op: str
    value: Any
    reduce: str = "first"
    equals: Any = None
    unit: str = ""


@dataclass(frozen=True)
class Stage:
    name: str
    argv: tuple[str, ...]
    description: str = ""
    inventory: str | None = None
    json: bool = True
    timeout: int = 3600
    ok_codes: tuple[int, ...] = (0,)
    gate_name: str | None = None
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Playbook:
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
    problems: list[Problem] = []
    PLAYBOOK.check(doc, doc.data, (), problems)
    names = [s.get("name") for s in doc.data.get("stages", []) if isinstance(s, dict)]
    for index, stage_name in enumerate(names):
        if stage_name in names[:index]:
            problems.append(doc.problem(("stages", index, "name"), f"stage {stage_name!r} is defined twice"))
    if problems:
        raise BadInput(f"{path}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems),
                       "fix the playbook; see playbooks/ for examples")
    variables = resolve_variables({**(builtins or {}), **doc.data.get("vars", {}), **(overrides or {})}, str(path))
    return build(path, doc, variables)


def build(path: Path, doc: Document, variables: dict) -> Playbook:
    stages = []
    for index, raw in enumerate(doc.data["stages"]):
        where = f"{path}:{doc.line_of(('stages', index))}: stage {raw['name']}"
        gate = raw.get("gate") or {}
        sub = lambda v, where=where: coerce(substitute(v, variables, where)) if isinstance(v, str) else v  # noqa: E731
        checks = tuple(Check(measure=substitute(c["measure"], variables, where),
                             path=substitute(c["path"], variables, where), op=c["op"], value=sub(c["value"]),
                             reduce=c.get("reduce", "first"), equals=sub(c.get("equals")), unit=c.get("unit", ""))
                       for c in gate.get("checks", []))
        stages.append(Stage(
            name=raw["name"], argv=tuple(substitute(str(a), variables, where) for a in raw["fxctl"]),
            description=raw.get("description", ""),
            inventory=substitute(raw["inventory"], variables, where) if "inventory" in raw else None,
            json=raw.get("json", True), timeout=raw.get("timeout", 3600),
            ok_codes=tuple(raw.get("ok_codes", [0])), gate_name=gate.get("name"), checks=checks))
    return Playbook(path, doc.data["name"], doc.data.get("description", ""), tuple(stages), variables)
