"""Searches over concurrency as generators that receive measurements: `point = search.send(observation)`.

`bracket_then_bisect` doubles concurrency until the SLO breaks (or halves until it holds), then narrows the
bracket, alternating an interpolation on the SLO margin with a plain bisection (so it never takes more
than about twice bisection's steps). `full_grid` measures every point. Both return the chosen point: the
highest output throughput among the points that met the SLO (None if none did).

Trials are noisy (the same point measured three times over HTTP: TTFT p90 34.8, 43.2, 45.0 s), so a point
near the SLO boundary can flip between met and missed. `with_repeats` wraps any search: it measures a
point again while the decision is close (|margin| below a threshold, or the runs disagree), as vLLM's
sweep repeats each point, and hands the search the median, keeping the spread in the observation.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Generator
from dataclasses import dataclass, replace

DEFAULT_GRID = (1, 2, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 64)


@dataclass(frozen=True)
class Observation:
    concurrency: int
    throughput: float      # output tokens/s
    margin: float          # SLO margin: >= 0 met (the smallest over the SLO's terms)
    runs: int = 1          # measurements behind this observation (medians when more than one)
    margin_min: float | None = None   # the spread of the margin over those runs
    margin_max: float | None = None

    @property
    def feasible(self) -> bool:
        return self.margin >= 0


Search = Generator[int, Observation, "Observation | None"]


def best_of(seen: dict[int, Observation]) -> Observation | None:
    feasible = [o for o in seen.values() if o.feasible]
    return max(feasible, key=lambda o: (o.throughput, -o.concurrency)) if feasible else None


def full_grid(grid: tuple[int, ...] = DEFAULT_GRID) -> Search:
    seen: dict[int, Observation] = {}
    for c in grid:
        seen[c] = yield c
    return best_of(seen)


def bracket_then_bisect(grid: tuple[int, ...] = DEFAULT_GRID, start: int = 4) -> Search:
    grid = tuple(sorted(set(grid)))
    seen: dict[int, Observation] = {}
    i = min(bisect.bisect_left(grid, start), len(grid) - 1)
    lo = hi = None            # indices: highest that met the SLO, lowest that did not
    seen[i] = yield grid[i]
    if seen[i].feasible:
        lo = i
        while hi is None and lo < len(grid) - 1:
            j = max(lo + 1, min(bisect.bisect_left(grid, 2 * grid[lo]), len(grid) - 1))
            seen[j] = yield grid[j]
            lo, hi = (j, hi) if seen[j].feasible else (lo, j)
    else:
        hi = i
        while lo is None and hi > 0:
            j = min(hi - 1, bisect.bisect_right(grid, grid[hi] // 2) - 1)
            j = max(j, 0)
            seen[j] = yield grid[j]
            lo, hi = (j, hi) if seen[j].feasible else (lo, j)
    interpolate = True
    while lo is not None and hi is not None and hi - lo > 1:
        mid = interpolated(grid, seen[lo], seen[hi], lo, hi) if interpolate else (lo + hi) // 2
        interpolate = not interpolate
        seen[mid] = yield grid[mid]
        lo, hi = (mid, hi) if seen[mid].feasible else (lo, mid)
    # throughput need not rise with concurrency (preemption, L2 contention): if a lower point beat the
    # highest one that met the SLO, look at that point's unmeasured neighbours too
    for _ in range(len(grid)):
        best = best_of(seen)
        if best is None:
            break
        b = next(k for k, o in seen.items() if o is best)
        around = [k for k in (b - 1, b + 1) if 0 <= k < len(grid) and k not in seen and (lo is None or k <= lo)]
        if b == lo or not around:
            break
        for k in around:
            seen[k] = yield grid[k]
    return best_of({grid[k]: o for k, o in seen.items()})


def with_repeats(search: Search, close: float = 0.10, most: int = 3) -> Search:
    """`search`, with each point measured again while its decision is close: fewer than `most` runs and
    either the median margin within `close` of 0 (0.10: 10 % of the bound) or runs on both sides of it.
    The search sees one observation per point: medians of margin and throughput, with the spread."""
    point = next(search)
    while True:
        runs = [(yield point)]
        while len(runs) < most and _undecided(runs, close):
            runs.append((yield point))
        try:
            point = search.send(median_observation(runs))
        except StopIteration as stop:
            return stop.value


def _undecided(runs: list[Observation], close: float) -> bool:
    margins = [o.margin for o in runs]
    return abs(statistics.median(margins)) < close or (min(margins) < 0 <= max(margins))


def median_observation(runs: list[Observation]) -> Observation:
    if len(runs) == 1:
        return runs[0]
    margins = [o.margin for o in runs]
    return replace(runs[0], throughput=statistics.median(o.throughput for o in runs),
                   margin=statistics.median(margins), runs=len(runs), margin_min=min(margins),
                   margin_max=max(margins))


def interpolated(grid: tuple[int, ...], low: Observation, high: Observation, lo: int, hi: int) -> int:
    """The grid index nearest where the margin, linear in concurrency, crosses zero; inside (lo, hi)."""
    span = low.margin - high.margin
    share = low.margin / span if span > 0 and math.isfinite(span) else 0.5
    target = low.concurrency + share * (high.concurrency - low.concurrency)
    k = min(range(lo + 1, hi), key=lambda idx: abs(grid[idx] - target))
    return k


def estimate_trials(grid: tuple[int, ...], full: bool) -> int:
    """An upper estimate of one configuration's trials, for the progress line."""
    return len(grid) if full else min(len(grid), 2 * math.ceil(math.log2(max(len(grid), 2))) + 1)


def against_grid(measure, grid: tuple[int, ...] = DEFAULT_GRID, start: int = 4) -> dict:
    """The search beside the full grid on the same measurements (each point measured once):
    trials used, the chosen point, the grid's best, and the chosen point's throughput gap to it."""
    cache: dict[int, Observation] = {}

    def cached(c: int) -> Observation:
        if c not in cache:
            cache[c] = measure(c)
        return cache[c]

    grid_best, _ = drive(full_grid(grid), cached)
    chosen, asked = drive(bracket_then_bisect(grid, start), cached)
    gap = None
    if grid_best and chosen:
        gap = 100 * (1 - chosen.throughput / grid_best.throughput) if grid_best.throughput else 0.0
    return {"grid_best": grid_best, "chosen": chosen, "trials": len(asked), "grid_trials": len(grid),
            "gap_pct": gap, "points": dict(sorted(cache.items()))}


def drive(search: Search, measure) -> tuple[Observation | None, list[Observation]]:
    """Run a search to its end: `measure(concurrency) -> Observation`."""
    observations = []
    point = next(search)
    while True:
        obs = measure(point)
        observations.append(obs)
        try:
            point = search.send(obs)
        except StopIteration as stop:
            return stop.value, observations
