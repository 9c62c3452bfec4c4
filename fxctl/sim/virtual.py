"""Driving the engine in virtual time (no HTTP, no sleeping): closed-loop clients, and run summaries.

This is the discrete-event mode of the same engine the HTTP server runs; the calibration uses it so that
hours of modelled serving take seconds.
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from dataclasses import dataclass

from fxctl.sim.engine import Engine
from fxctl.sim.request import SimRequest

MAX_IDLE_STEPS = 1000


@dataclass
class RunSummary:
    requests: int
    duration_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    output_tokens: int
    output_throughput: float   # output tokens per second of model time
    preemptions: int

    @classmethod
    def of(cls, done: list[SimRequest], duration: float, preemptions: int) -> RunSummary:
        ttfts = sorted(r.ttft() for r in done)
        tpots = [(r.e2e() - r.ttft()) / (r.generated - 1) for r in done if r.generated > 1]
        tokens = sum(r.generated for r in done)
        return cls(len(done), duration, percentile(ttfts, 50), percentile(ttfts, 90),
                   statistics.median(tpots) if tpots else 0.0, tokens,
                   tokens / duration if duration > 0 else 0.0, preemptions)


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile with linear interpolation (numpy's default)."""
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * pct / 100
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def run_closed_loop(engine: Engine, prompts: list[list[int]], concurrency: int, output_tokens: int,
                    label: str = "r", keys_cache: dict | None = None) -> RunSummary:
    """`concurrency` clients each send their next prompt as soon as the previous answer is complete."""
    queue = deque(prompts)
    keys_cache = {} if keys_cache is None else keys_cache  # prompt -> block hashes, for replays
    ids = itertools.count()
    done: list[SimRequest] = []
    start = engine.now
    preempted_before = engine.stats.preemptions

    def submit() -> None:
        prompt = queue.popleft()
        known = keys_cache.get(id(prompt))
        keys = known[1] if known and known[0] is prompt else []
        req = SimRequest(f"{label}-{next(ids)}", prompt, output_tokens, arrival=engine.now, block_keys=keys)
        engine.add_request(req)
        keys_cache[id(prompt)] = (prompt, req.block_keys)  # holding the prompt keeps its id unique

    for _ in range(min(concurrency, len(queue))):
        submit()
    idle = 0
    while engine.has_work():
        result = engine.step()
        idle = idle + 1 if result.duration == 0 and not result.emitted else 0
        if idle > MAX_IDLE_STEPS:
            raise RuntimeError("the engine made no progress (a request that can never be scheduled?)")
        for req in result.finished:
            done.append(req)
            if queue:
                submit()
    return RunSummary.of(done, engine.now - start, engine.stats.preemptions - preempted_before)


GOLDEN = 0.6180339887498949


def distinct_prompts(count: int, mean_tokens: int, spread: float = 0.0, seed: int = 0) -> list[list[int]]:
    """Prompts that share no prefix (each starts with its own token, so chained hashes differ from block 0).

    Lengths cover mean x [1 - spread, 1 + spread] evenly in a scrambled order (a golden-ratio sequence), so
    clients fall out of step as with real prompts, yet the mean is the mean and runs are repeatable.
    """
    longest = int(mean_tokens * (1 + spread)) + 1
    body = [(7919 * i) % 151_000 + 10 for i in range(longest)]
    prompts = []
    for n in range(count):
        position = ((n + 1) * GOLDEN + seed * 0.1) % 1.0
        length = max(2, round(mean_tokens * (1 - spread + 2 * spread * position)))
        prompts.append([150_000 + (seed * 7 + n) % 1900, n, *body[:length - 2]])
    return prompts
