"""The playbook report: a table for the terminal, JSON for scripts, Markdown a customer could read."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from fxctl.output import table
from fxctl.playbook.model import Playbook
from fxctl.playbook.runner import StageResult


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def gate_rows(results: list[StageResult]) -> list[list[str]]:
    rows = []
    for result in results:
        if not result.checks:
            rows.append([result.stage, result.gate or "-", result.status, "", "", "", result.error[:120]])
        for check in result.checks:
            rows.append([result.stage, result.gate or "-", result.status, check.measure,
                         f"{fmt(check.value)} {check.unit}".strip(), f"{check.op} {fmt(check.threshold)}",
                         "pass" if check.passed else "FAIL"])
    return rows


HEADERS = ["stage", "gate", "stage status", "measure", "measured", "threshold", "result"]


def as_data(playbook: Playbook, results: list[StageResult], run_dir: Path) -> dict:
    return {"playbook": playbook.name, "file": str(playbook.path), "run_dir": str(run_dir),
            "passed": all(r.passed for r in results if r.status != "not run") and
            not any(r.status == "not run" and r.error == "an earlier stage failed" for r in results),
            "stages": [{k: v for k, v in asdict(r).items() if k != "output"} for r in results]}


def markdown(playbook: Playbook, results: list[StageResult], run_dir: Path) -> str:
    data = as_data(playbook, results, run_dir)
    lines = [f"# Acceptance report: {playbook.name}", "",
             playbook.description.strip() or "", "",
             f"Run: `{run_dir}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
             f"Overall: **{'PASSED' if data['passed'] else 'FAILED'}**.", "",
             "| stage | gate | measure | measured | threshold | result |", "|---|---|---|---|---|---|"]
    for result in results:
        if not result.checks:
            lines.append(f"| {result.stage} | {result.gate or '-'} | - | - | - | {result.status} |")
        for check in result.checks:
            lines.append(f"| {result.stage} | {result.gate or '-'} | {check.measure} | "
                         f"{fmt(check.value)} {check.unit} | {check.op} {fmt(check.threshold)} | "
                         f"{'pass' if check.passed else '**FAIL**'} |")
    failures = [r for r in results if r.status == "failed"]
    if failures:
        lines += ["", "## What failed", ""] + [f"- **{r.stage}**: {r.error}" for r in failures]
    lines += ["", "Each stage ran the fxctl command shown in its file under the run directory, with its full "
              "JSON output; figures from `fxctl sim` are EMULATED (simulated GPU timing).", ""]
    return "\n".join(lines)


def write_reports(playbook: Playbook, results: list[StageResult], run_dir: Path) -> dict[str, Path]:
    paths = {"json": run_dir / "report.json", "markdown": run_dir / "report.md"}
    paths["json"].write_text(json.dumps(as_data(playbook, results, run_dir), indent=1, default=str) + "\n")
    paths["markdown"].write_text(markdown(playbook, results, run_dir))
    return paths


def terminal_table(results: list[StageResult]) -> str:
    return table(gate_rows(results), HEADERS)
