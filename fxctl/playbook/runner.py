"""Running a playbook: each stage is the real fxctl CLI in a subprocess (-o json), its output kept,
its gate judged on the measured values. A failed stage or gate stops the run; `--resume` skips stages
that passed; every stage's result is a file in the run directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fxctl.errors import BadInput
from fxctl.paths import playbook_runs_dir
from fxctl.playbook.measures import compare, measure
from fxctl.playbook.model import Playbook, Stage

OUTPUT_TAIL = 2000


@dataclass
class CheckResult:
    measure: str
    value: Any
    op: str
    threshold: Any
    unit: str
    passed: bool


@dataclass
class StageResult:
    stage: str
    status: str                       # passed | failed | skipped | not run
    exit_code: int | None = None
    duration_s: float = 0.0
    gate: str | None = None
    checks: list[CheckResult] = field(default_factory=list)
    error: str = ""
    command: list[str] = field(default_factory=list)
    output: Any = None

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "skipped")


def runs_root() -> Path:
    """Where playbook runs go by default (fxctl.paths.playbook_runs_dir)."""
    return playbook_runs_dir()


def stage_file(run_dir: Path, index: int, stage: Stage) -> Path:
    return run_dir / f"stage-{index:02d}-{stage.name}.json"


def judge(stage: Stage, data: Any) -> list[CheckResult]:
    results = []
    for check in stage.checks:
        value = measure(data, check.path, check.reduce, check.equals) if data is not None else None
        results.append(CheckResult(check.measure, value, check.op, check.value, check.unit,
                                   compare(value, check.op, check.value)))
    return results


def run_stage(stage: Stage, inventory: str | None) -> StageResult:
    argv = [sys.executable, "-m", "fxctl"]
    use_inventory = stage.inventory or inventory
    if use_inventory:
        argv += ["-i", use_inventory]
    if stage.json:
        argv += ["-o", "json"]
    argv += list(stage.argv)
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=stage.timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return StageResult(stage.name, "failed", None, time.monotonic() - start, stage.gate_name,
                           error=f"timed out after {stage.timeout}s", command=argv[1:])
    result = StageResult(stage.name, "passed", proc.returncode, time.monotonic() - start, stage.gate_name,
                         command=["fxctl", *argv[3:]])
    data = None
    if proc.stdout.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            data = None
    result.output = data if data is not None else proc.stdout[-OUTPUT_TAIL:]
    if proc.returncode not in stage.ok_codes:
        result.status = "failed"
        tail = (proc.stderr.strip() or proc.stdout.strip())[-600:]
        result.error = f"exit {proc.returncode}: {tail}"
    result.checks = judge(stage, data)
    if any(not c.passed for c in result.checks):
        result.status = "failed"
        failed = [c for c in result.checks if not c.passed]
        result.error = result.error or "; ".join(
            f"{c.measure}: measured {c.value} {c.unit}, needs {c.op} {c.threshold}" for c in failed)
    return result


def select_stages(playbook: Playbook, only: str | None, start_from: str | None) -> set[str]:
    names = [s.name for s in playbook.stages]
    for wanted in (only, start_from):
        if wanted and wanted not in names:
            raise BadInput(f"no stage named {wanted!r} in {playbook.path}", f"stages: {', '.join(names)}")
    if only:
        return {only}
    if start_from:
        return set(names[names.index(start_from):])
    return set(names)


def run_playbook(playbook: Playbook, *, inventory: str | None, run_dir: Path, only: str | None = None,
                 start_from: str | None = None, resume: bool = False,
                 progress: Callable[[str], Any] | None = None) -> list[StageResult]:
    run_dir.mkdir(parents=True, exist_ok=True)
    chosen = select_stages(playbook, only, start_from)
    results: list[StageResult] = []
    stopped = False
    for index, stage in enumerate(playbook.stages):
        path = stage_file(run_dir, index, stage)
        if stage.name not in chosen:
            results.append(StageResult(stage.name, "not run", gate=stage.gate_name, error="not selected"))
            continue
        if stopped:
            results.append(StageResult(stage.name, "not run", gate=stage.gate_name, error="an earlier stage failed"))
            continue
        if resume and path.exists():
            previous = json.loads(path.read_text())
            if previous["status"] == "passed":
                results.append(StageResult(stage.name, "skipped", previous.get("exit_code"), 0.0, stage.gate_name,
                                           [CheckResult(**c) for c in previous.get("checks", [])],
                                           "passed in an earlier attempt of this run"))
                continue
        if progress:
            progress(f"[{index + 1}/{len(playbook.stages)}] {stage.name}: fxctl {' '.join(stage.argv)}")
        result = run_stage(stage, inventory)
        path.write_text(json.dumps(asdict(result), indent=1, default=str) + "\n")
        if progress:
            error = f": {result.error}" if result.error else ""
            progress(f"      {result.status} in {result.duration_s:.0f}s{error}")
        results.append(result)
        stopped = result.status == "failed"
    return results
