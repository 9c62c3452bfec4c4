"""Counters and histograms the engine keeps, rendered as Prometheus text with vLLM's metric names."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)
TIERS = ("l1", "l2")


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self):
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


@dataclass
class EngineStats:
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    tier_hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    tier_misses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    tier_read_bytes: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIERS, 0.0))
    tier_stored_chunks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(TPOT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    queue_time: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
