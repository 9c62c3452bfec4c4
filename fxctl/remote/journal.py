"""The run journal: every command sent to a host, as JSON lines in a run directory, secrets masked."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path


def runs_root() -> Path:
    from fxctl.paths import runs_dir

    return runs_dir()


@dataclass
class RunJournal:
    """Appends one JSON object per command: host, command (masked), exit code, duration, output tail."""

    path: Path
    _lock: threading.Lock = None  # type: ignore[assignment]

    def __post_init__(self):
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def new(cls, label: str) -> RunJournal:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = runs_root() / f"{stamp}-{label}-{os.getpid()}"
        return cls(folder / "journal.jsonl")

    def record(self, **entry) -> None:
        entry.setdefault("time", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        line = json.dumps(entry, sort_keys=False)
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
