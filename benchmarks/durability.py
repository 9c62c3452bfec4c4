"""Durability drills of fxctl's tier and LMCache's own persistent L2 adapters (fs_native, fs, raw_block) in the
real `lmcache server`, driven by LMCache's own MP client (issue 28 #3; fxctl/tierbench/durability.py says
what each drill does and how it decides).

    python -m benchmarks.durability [--adapters fxctl,fs_native,fs,raw_block] [--drills crash,capacity,damage,full]
                                    [--repeats N] [--python ~/.cache/fxctl/serving-env/bin/python] [--json out.json]

--repeats N runs everything N times, the adapters' order rotated each time, a table per run.

The servers run with the serving env's python (raw_block's Rust helper is installed there; `fxctl serve
install-env`) and this checkout on PYTHONPATH (the adapter LMCache loads is this fxctl's). Needs root for the
`full` drill's tmpfs. Nothing here is timed but the drills' own seconds.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fxctl.paths import serving_env_dir
from fxctl.tierbench.drills import Drills, default_env, run
from fxctl.tierbench.durability import ADAPTERS, DRILLS

REPO = Path(__file__).resolve().parent.parent


def cell(drill: str, r: dict) -> str:
    if "failed" in r:
        return "failed: " + r["failed"].splitlines()[0][:60]
    if "skipped" in r:
        return "n/a: " + r["skipped"][:60]
    if drill == "crash":
        return (f"{r['found']}/{r['chunks']} acked chunks found ({100 * (r['found_share'] or 0):.0f} %), "
                f"{r['different_kv']} different KV (killed {r['killed_after_s']} s in)")
    if drill == "capacity":
        return (f"{r['disk_after_first'] / 2**20:.0f} MiB -> {r['disk_after_restart'] / 2**20:.0f} MiB on disk "
                f"for a {r['cap_bytes'] / 2**20:.0f} MiB cap ({r['over_cap']}x)")
    if drill == "damage":
        counted = "" if r["errors_counted"] is None else f", {r['errors_counted']:.0f} counted"
        return (f"of {r['sequences']} sequences: {r['same_kv']} same KV, {r['different_kv']} DIFFERENT KV, "
                f"{r['sequences'] - r['same_kv'] - r['different_kv']} missed{counted}")
    counted = f"{r['errors_counted']:.0f} errors counted" if r["errors_counted"] is not None else \
        f"{r['error_log_lines']} error lines in its log (no counter)"
    return f"{r['served']}/{r['sequences']} served, server {'up' if r['server_alive'] else 'DOWN'}, {counted}"


def table(results: dict, drills: list[str]) -> str:
    lines = ["| adapter | " + " | ".join(drills) + " |", "|---" * (len(drills) + 1) + "|"]
    for kind, row in results.items():
        lines.append(f"| {kind} | " + " | ".join(cell(d, row[d]) for d in drills) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapters", default=",".join(ADAPTERS))
    parser.add_argument("--drills", default=",".join(DRILLS))
    parser.add_argument("--python", default=str(serving_env_dir() / "bin" / "python"))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    kinds, drills = args.adapters.split(","), args.drills.split(",")
    runs = []
    for n in range(args.repeats):
        order = kinds[n % len(kinds):] + kinds[:n % len(kinds)]
        with tempfile.TemporaryDirectory(prefix="fxctl-drills-", dir="/var/tmp") as work:
            results = run(Drills(Path(work), args.python, default_env(str(REPO))), order, drills)
        runs.append({k: results[k] for k in kinds})
        print(f"run {n + 1} (order {', '.join(order)}):\n" + table(runs[-1], drills))
    if args.json:
        args.json.write_text(json.dumps(runs[0] if len(runs) == 1 else runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
