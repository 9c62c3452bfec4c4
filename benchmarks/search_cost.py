"""Search cost: trials used by fxctl tune's search against the full concurrency grid, and the chosen
point's distance from the grid's best, on several emulator profiles (engine in virtual time).

The SLO of each row is a multiple of the profile's own unloaded TTFT p50 (measured at concurrency 1),
so every profile gets constraints that bite somewhere inside the grid.

    python -m benchmarks.search_cost [--profiles a,b] [--factors 1.2,1.5,2,3] [--grid 1,2,...]
"""

from __future__ import annotations

import argparse
import time

from tabulate import tabulate

from fxctl.loadgen.metrics import Limit
from fxctl.sim.profile import resolve_profile_path
from fxctl.tune.drivers import TrialLoad, VirtualDriver
from fxctl.tune.search import Observation, against_grid
from fxctl.tune.sweep import TuneOptions, judge, workload_of

PROFILES = ("mi308x-qwen3-coder-480b-tp8", "mi308x-qwen3-coder-480b-tp4x2", "h200-70b", "atlas910b-70b", "lab")
GRID = (1, 2, 4, 6, 8, 12, 16, 20, 24, 32)


def measured_grid(profile: str, grid: tuple[int, ...], requests_per_client: int = 2,
                  workload: str = "cold-recovery") -> dict[int, dict]:
    """Every grid point measured once (virtual time: deterministic), so searches can be replayed."""
    path = resolve_profile_path(profile)
    target = VirtualDriver(path)
    load = TrialLoad(workload_of(TuneOptions(slo="ttft_p50<=1s", profile=profile, workload=workload), path),
                     requests_per_client, [], 600, 1.0, "virtual")
    return {c: target.measure({}, c, load, None) for c in grid}


def compare(results: dict[int, dict], factor: float, grid: tuple[int, ...]) -> dict:
    bound = float(f"{factor * results[grid[0]]['median_ttft_ms'] / 1000:.3g}")
    limits = [Limit("ttft", "p50", bound)]
    outcome = against_grid(lambda c: Observation(c, results[c]["output_throughput"], judge(results[c], limits)), grid)
    outcome["slo"] = str(limits[0])
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--factors", default="1.2,1.5,2,3")
    parser.add_argument("--grid", default=",".join(map(str, GRID)))
    args = parser.parse_args()
    grid = tuple(int(c) for c in args.grid.split(","))
    rows = []
    for profile in args.profiles.split(","):
        started = time.perf_counter()
        results = measured_grid(profile, grid)
        wall = time.perf_counter() - started
        for factor in (float(f) for f in args.factors.split(",")):
            o = compare(results, factor, grid)
            gb, ch = o["grid_best"], o["chosen"]
            rows.append((profile, o["slo"], f"{o['trials']}/{o['grid_trials']}",
                         "-" if not gb else f"c={gb.concurrency} {gb.throughput:.1f}",
                         "-" if not ch else f"c={ch.concurrency} {ch.throughput:.1f}",
                         "-" if o["gap_pct"] is None else f"{o['gap_pct']:.1f} %", f"{wall:.1f}"))
    print(tabulate(rows, headers=["profile", "SLO", "trials/grid", "grid best (tok/s)", "search chose",
                                  "gap", "grid wall s"]))


if __name__ == "__main__":
    main()
