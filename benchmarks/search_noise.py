"""Search under noise: fxctl tune's search, with and without repeats near the SLO boundary, against the
full grid, when every trial is noisy.

Truth: every grid point of each emulator profile measured once in virtual time (deterministic, as in
benchmarks/search_cost.py), SLOs at multiples of the profile's unloaded TTFT p50. Each trial then draws
noise: TTFT statistics times exp(N(0, sigma)) (sigma 0.12 by default: three HTTP runs of one point gave
TTFT p90 34.8, 43.2 and 45.0 s, a spread of about 13 %), output throughput times exp(N(0, sigma_tp)).
A search lands when the point it chose is, in truth, within 5 % of the grid's best throughput and misses
the SLO by at most 5 % of the bound. Printed per strategy: how often it lands, mean trials, worst gap.

    python -m benchmarks.search_noise [--profiles a,b] [--factors 1.2,1.5,2,3] [--seeds 40] [--sigma 0.12]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from tabulate import tabulate

from benchmarks.search_cost import GRID, PROFILES, measured_grid
from fxctl.loadgen.metrics import Limit
from fxctl.tune.search import Observation, best_of, bracket_then_bisect, drive, full_grid, with_repeats
from fxctl.tune.sweep import judge

TOLERANCE = 0.05


def noisy(result: dict, rnd: random.Random, sigma: float, sigma_tp: float) -> dict:
    """One noisy trial of a point: every TTFT statistic scaled by one draw, throughput by another."""
    scale = math.exp(rnd.gauss(0, sigma))
    out = {k: v * scale if k.endswith("_ttft_ms") and isinstance(v, (int, float)) else v for k, v in result.items()}
    out["output_throughput"] = result["output_throughput"] * math.exp(rnd.gauss(0, sigma_tp))
    return out


def strategies(grid: tuple[int, ...], within: float = 0.10, most: int = 3) -> dict:
    return {"grid (each point once)": lambda: full_grid(grid),
            "search": lambda: bracket_then_bisect(grid),
            f"search + repeats (<= {most} runs within {within:g})":
                lambda: with_repeats(bracket_then_bisect(grid), within, most)}


def score(results: dict[int, dict], limits: list[Limit], chosen: Observation | None) -> tuple[bool, float | None]:
    """(landed, gap %) of a chosen point, judged on the noiseless results."""
    truth = {c: Observation(c, r["output_throughput"], judge(r, limits)) for c, r in results.items()}
    best = best_of(truth)
    if best is None or chosen is None:
        return best is None and chosen is None, None
    real = truth[chosen.concurrency]
    gap = 100 * (1 - real.throughput / best.throughput) if best.throughput else 0.0
    return gap <= 100 * TOLERANCE and real.margin >= -TOLERANCE, gap


def run(profiles, factors, seeds: int, sigma: float, sigma_tp: float, grid=GRID, within: float = 0.10,
        most: int = 3) -> list[list]:
    tally: dict[str, dict] = {name: {"landed": 0, "cases": 0, "trials": [], "gaps": []}
                              for name in strategies(grid, within, most)}
    for profile in profiles:
        results = measured_grid(profile, grid)
        for factor in factors:
            bound = float(f"{factor * results[grid[0]]['median_ttft_ms'] / 1000:.3g}")
            limits = [Limit("ttft", "p50", bound)]
            for seed in range(seeds):
                for name, make in strategies(grid, within, most).items():
                    rnd = random.Random(f"{profile}/{factor}/{seed}")  # the same noise stream for each strategy

                    def measure(c, rnd=rnd, results=results, limits=limits):
                        r = noisy(results[c], rnd, sigma, sigma_tp)
                        return Observation(c, r["output_throughput"], judge(r, limits))

                    chosen, asked = drive(make(), measure)
                    landed, gap = score(results, limits, chosen)
                    t = tally[name]
                    t["cases"] += 1
                    t["landed"] += landed
                    t["trials"].append(len(asked))
                    if gap is not None:
                        t["gaps"].append(gap)
    return [[name, f"{100 * t['landed'] / t['cases']:.0f} % ({t['landed']}/{t['cases']})",
             f"{statistics.mean(t['trials']):.1f} / {len(grid)}", f"{max(t['trials'])}",
             f"{statistics.median(t['gaps']):.1f} %" if t["gaps"] else "-",
             f"{max(t['gaps']):.1f} %" if t["gaps"] else "-"] for name, t in tally.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--factors", default="1.2,1.5,2,3")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--sigma", type=float, default=0.12, help="TTFT noise (log-normal sigma)")
    parser.add_argument("--sigma-tp", type=float, default=0.05, help="throughput noise (log-normal sigma)")
    parser.add_argument("--repeat-within", type=float, default=0.10, help="as fxctl tune --repeat-within")
    parser.add_argument("--repeats", type=int, default=3, help="as fxctl tune --repeats")
    args = parser.parse_args()
    rows = run(args.profiles.split(","), [float(f) for f in args.factors.split(",")], args.seeds, args.sigma,
               args.sigma_tp, within=args.repeat_within, most=args.repeats)
    print(f"TTFT noise sigma {args.sigma}, throughput noise sigma {args.sigma_tp}; 'landed': within "
          f"{100 * TOLERANCE:g} % of the grid's best (noiseless), SLO missed by at most {100 * TOLERANCE:g} %")
    print(tabulate(rows, headers=["strategy", "landed", "mean trials / grid", "most trials", "median gap",
                                  "worst gap"]))


if __name__ == "__main__":
    main()
