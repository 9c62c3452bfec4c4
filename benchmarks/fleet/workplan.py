"""The work each tool repeats: the commands fxctl's facts send, per fan-out ("wave"), per host.

A reference run of the operation in-process (untimed) records every command as sent (sudo wrapper
included) in fxctl's run journal, and a marker at the start of each fan-out through the progress hook
of fxctl.remote.pool; so the anchors run what fxctl's fact classes send today, not a copy of them.
"""

from __future__ import annotations

import json
from pathlib import Path

from fxctl.inventory import load_inventory
from fxctl.remote import progress
from fxctl.remote.journal import RunJournal

OPERATIONS = {"provision-check": ["provision", "--check"], "net-verify": ["net", "verify"]}


class WaveMarks(progress.Silent):
    """A display that writes a marker into the journal when a fan-out starts."""

    def __init__(self, journal: RunJournal):
        self.journal = journal
        self.count = 0

    def wave(self, total: int):
        self.journal.record(wave=self.count, hosts=total)
        self.count += 1
        return progress.SilentWave()


def reference_run(operation: str, inventory_path: Path, folder: Path) -> tuple[list[dict[str, list[str]]], dict]:
    """Run the operation once; the waves (host -> commands, in order) and a summary of its result."""
    inventory = load_inventory(inventory_path)
    journal = RunJournal(folder / f"reference-{operation}.jsonl")
    with progress.show_progress(WaveMarks(journal)):
        if operation == "provision-check":
            from fxctl.engine.apply import exit_code_for
            from fxctl.provision.rounds import provision

            result = provision(inventory, check=True, journal=journal)
            reports = result.all_reports()
            statuses: dict[str, int] = {}
            for report in reports:
                statuses[report.status.value] = statuses.get(report.status.value, 0) + 1
            summary = {"exit_code": int(exit_code_for(reports, True)), "host_rounds": statuses,
                       "pending_steps": sum(r.changed for r in reports),
                       "errors": sorted({r.error for r in reports if r.error})[:3]}
        else:
            from fxctl.net.verify import verify

            result = verify(inventory, journal=journal)
            summary = {"exit_code": 0 if result["ok"] else 1, "ports": len(result["ports"]),
                       "problems": result["problems"][:2], "traffic": result["traffic"]}
    return waves_of(journal.entries()), summary


def waves_of(entries: list[dict]) -> list[dict[str, list[str]]]:
    waves: list[dict[str, list[str]]] = []
    for entry in entries:
        if "wave" in entry:
            waves.append({})
        elif waves:
            waves[-1].setdefault(entry["host"], []).append(entry["command"])
    return [w for w in waves if w]


def write_plan(path: Path, waves: list[dict[str, list[str]]]) -> None:
    path.write_text(json.dumps(waves))


def count(waves: list[dict[str, list[str]]]) -> dict:
    return {"waves": len(waves), "commands": sum(len(c) for w in waves for c in w.values()),
            "host_connections": sum(len(w) for w in waves)}
