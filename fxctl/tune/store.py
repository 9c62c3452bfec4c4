"""The run directory: run.json (the options), one JSON file per trial, and the outputs.

A trial's file name comes from its server settings, kind and concurrency, so a resumed run finds it and
skips the measurement. Files are written atomically (temporary name, then rename): Ctrl-C never leaves
half a trial, only finished ones.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from fxctl.errors import BadInput
from fxctl.paths import runs_dir

RUN_FILE = "run.json"


def default_run_dir() -> Path:
    return runs_dir() / time.strftime("tune-%Y%m%d-%H%M%S")


def safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", text)


class RunStore:
    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)
        self.trials_dir = self.dir / "trials"

    @classmethod
    def create(cls, run_dir: Path, options: dict) -> RunStore:
        store = cls(run_dir)
        if (store.dir / RUN_FILE).exists():
            raise BadInput(f"{run_dir} already holds a run",
                           f"resume it with --resume {run_dir}, or pick another --run-dir")
        store.trials_dir.mkdir(parents=True, exist_ok=True)
        write_json(store.dir / RUN_FILE, options)
        return store

    @classmethod
    def open(cls, run_dir: Path) -> tuple[RunStore, dict]:
        store = cls(run_dir)
        path = store.dir / RUN_FILE
        if not path.exists():
            raise BadInput(f"no run to resume in {run_dir}", f"a run directory holds {RUN_FILE} and trials/")
        return store, json.loads(path.read_text())

    def trial_path(self, settings_key: str, kind: str, concurrency: int) -> Path:
        return self.trials_dir / f"{safe(settings_key)}__{kind}__c{concurrency:04d}.json"

    def load_trial(self, settings_key: str, kind: str, concurrency: int) -> dict | None:
        path = self.trial_path(settings_key, kind, concurrency)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None   # unreadable: measured again

    def save_trial(self, trial: dict) -> Path:
        path = self.trial_path(trial["settings_key"], trial["kind"], trial["concurrency"])
        write_json(path, trial)
        return path

    def all_trials(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.trials_dir.glob("*.json"))]


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
