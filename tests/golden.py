"""Golden-file runner: facts in, commands out; real command output in, parsed value out.

ops/*.json:   {"operation": "fxctl.ops.files:ensure_line", "kwargs": {...}, "commands": [...], "reason": "..."}
facts/*.json: {"fact": "fxctl.facts.files:FileContent", "args": {...}, "stdout": "...", "exit_code": 0,
               "parsed": ..., "command": "..."}   (stdout may instead name a file: "stdout_file": "outputs/x.txt")
               Both sides are pinned: the command the fact runs (masked) and the value parsed from real output.

`check_golden` is the one comparison every golden test uses (these, tests/plan_golden.py, tests/test_net_plan.py):
FXCTL_UPDATE_GOLDEN=1 rewrites the expected side of each case that differs and fails that test ("rewrote
...: review the diff"), so an update run never passes; cases that already match pass.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

from fxctl.engine.plan import run_operation
from fxctl.output import to_plain

GOLDEN = Path(__file__).parent / "golden"


def load_target(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def golden_files(kind: str) -> list[Path]:
    return sorted((GOLDEN / kind).glob("*.json"))


def check_golden(path: Path, case: dict, got: dict, indent: int = 2) -> None:
    """Compare each key of `got` (what the code produces now) with the same key of `case` (read from `path`).
    Under FXCTL_UPDATE_GOLDEN=1 a case that differs is rewritten with `got`, and the test fails."""
    differ = sorted(key for key, value in got.items() if case.get(key) != value)
    if not differ:
        return
    if os.environ.get("FXCTL_UPDATE_GOLDEN"):
        path.write_text(json.dumps({**case, **got}, indent=indent) + "\n")
        pytest.fail(f"rewrote {', '.join(differ)} of {path}: review the diff, then run without FXCTL_UPDATE_GOLDEN")
    for key in differ:  # pytest shows the first difference in full
        assert got[key] == case.get(key), f"{path.name}: {key} differs (FXCTL_UPDATE_GOLDEN=1 rewrites it)"


def check_golden_file(path: Path, got) -> None:
    """`got` equals the whole JSON of `path`. Under FXCTL_UPDATE_GOLDEN=1 a file that differs (or is missing)
    is rewritten with `got`, and the test fails: a rewritten golden never passes the run that wrote it."""
    want = json.loads(path.read_text()) if path.exists() else None
    if got == want:
        return
    if os.environ.get("FXCTL_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2) + "\n")
        pytest.fail(f"rewrote {path}: review the diff, then run without FXCTL_UPDATE_GOLDEN")
    assert got == want, f"{path} differs: review, then FXCTL_UPDATE_GOLDEN=1 rewrites it"


def check_op_case(path: Path) -> None:
    case = json.loads(path.read_text())
    step = run_operation(path.stem, load_target(case["operation"])(**case["kwargs"]))
    commands = [c.masked() for c in step.commands]
    check_golden(path, case, {"commands": commands, "reason": step.reason if not commands else ""})


def check_fact_case(path: Path) -> None:
    case = json.loads(path.read_text())
    fact = load_target(case["fact"])(**case.get("args", {}))
    stdout = case.get("stdout")
    if stdout is None:
        stdout = (path.parent / case["stdout_file"]).read_text()
    check_golden(path, case, {"parsed": to_plain(fact.parse(stdout, case.get("exit_code", 0))),
                              "command": fact.command().masked()})
