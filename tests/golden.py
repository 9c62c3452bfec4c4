"""Golden-file runner: facts in, commands out; real command output in, parsed value out.

ops/*.json:   {"operation": "fxctl.ops.files:ensure_line", "kwargs": {...}, "commands": [...], "reason": "..."}
facts/*.json: {"fact": "fxctl.facts.files:FileContent", "args": {...}, "stdout": "...", "exit_code": 0,
               "parsed": ...}   (stdout may instead name a file: "stdout_file": "outputs/x.txt")
Regenerate the expected side with FXCTL_UPDATE_GOLDEN=1 (then review the diff).
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from fxctl.engine.plan import run_operation
from fxctl.output import to_plain

GOLDEN = Path(__file__).parent / "golden"


def load_target(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def golden_files(kind: str) -> list[Path]:
    return sorted((GOLDEN / kind).glob("*.json"))


def _update(path: Path, case: dict, key: str, value) -> None:
    case[key] = value
    path.write_text(json.dumps(case, indent=2) + "\n")


def check_op_case(path: Path) -> None:
    case = json.loads(path.read_text())
    step = run_operation(path.stem, load_target(case["operation"])(**case["kwargs"]))
    commands = [c.masked() for c in step.commands]
    if os.environ.get("FXCTL_UPDATE_GOLDEN"):
        _update(path, case, "commands", commands)
        _update(path, case, "reason", step.reason if not commands else "")
        return
    assert commands == case["commands"], f"{path.name}: commands differ"
    if not commands:
        assert step.reason == case.get("reason", step.reason), f"{path.name}: reason differs"


def check_fact_case(path: Path) -> None:
    case = json.loads(path.read_text())
    fact = load_target(case["fact"])(**case.get("args", {}))
    stdout = case.get("stdout")
    if stdout is None:
        stdout = (path.parent / case["stdout_file"]).read_text()
    parsed = to_plain(fact.parse(stdout, case.get("exit_code", 0)))
    if os.environ.get("FXCTL_UPDATE_GOLDEN"):
        _update(path, case, "parsed", parsed)
        return
    assert parsed == case["parsed"], f"{path.name}: parsed value differs"
