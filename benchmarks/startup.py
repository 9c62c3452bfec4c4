"""fxctl's start-up: `fxctl --version`, `fxctl --help` and `fxctl inventory check` in fresh processes against
`python -c pass` (the interpreter's own start), alternated, N repeats each; min / median / max and the
ratio of medians to python's. Each is the console script a user runs (the venv's bin/fxctl).

    python -m benchmarks.startup [--repeats 15] [--fxctl .venv/bin/fxctl] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

INVENTORY = "version: 1\nhosts:\n  a: {address: 192.0.2.1}\n"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--fxctl", default=str(Path(sys.executable).with_name("fxctl")))
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "inv.yaml"
        inventory.write_text(INVENTORY)
        cases = {"python -c pass": [sys.executable, "-c", "pass"],
                 "fxctl --version": [args.fxctl, "--version"],
                 "fxctl --help": [args.fxctl, "--help"],
                 "fxctl inventory check": [args.fxctl, "-i", str(inventory), "inventory", "check"]}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():   # one warm-up each: the page cache holds every file after it
            timed(argv)
        for repeat in range(args.repeats):
            order = list(cases) if repeat % 2 == 0 else list(reversed(cases))   # alternated
            for name in order:
                times[name].append(timed(cases[name]))
    base = statistics.median(times["python -c pass"])
    rows = [[name, f"{min(t):.3f}", f"{statistics.median(t):.3f}", f"{max(t):.3f}",
             f"{statistics.median(t) / base:.1f}x"] for name, t in times.items()]
    print(tabulate(rows, headers=["command", "min s", "median s", "max s", "median / python's"]))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"repeats": args.repeats, "times_s": times}, indent=1) + "\n")


if __name__ == "__main__":
    main()
