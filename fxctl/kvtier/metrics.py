"""Counters and latency histograms of a tier store, as a plain dict that serve, tune and /metrics read."""

from __future__ import annotations

import threading
from collections import Counter

# upper bounds of the latency buckets, in seconds (Prometheus style: cumulative "le" buckets)
LATENCY_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0, 10.0)


class LatencyHistogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BOUNDS) + 1)
        self.total_s = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(LATENCY_BOUNDS):
            if seconds <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total_s += seconds
        self.n += 1

    def quantile(self, q: float) -> float | None:
        """Upper bound of the bucket holding the q-quantile (None without samples)."""
        if not self.n:
            return None
        rank, seen = q * self.n, 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank and c:
                return LATENCY_BOUNDS[i] if i < len(LATENCY_BOUNDS) else float("inf")
        return float("inf")

    def to_dict(self) -> dict:
        cumulative, buckets = 0, {}
        for bound, c in zip(LATENCY_BOUNDS + (float("inf"),), self.counts):
            cumulative += c
            buckets["+Inf" if bound == float("inf") else str(bound)] = cumulative
        return {"count": self.n, "sum_s": round(self.total_s, 6), "buckets": buckets,
                "p50_s": self.quantile(0.5), "p99_s": self.quantile(0.99)}


class TierMetrics:
    """Thread-safe counters (`l1_hits`, `l2_bytes_read` ...) and named latency histograms."""

    HISTOGRAMS = ("get_l1", "get_l2", "put", "l2_write", "contains")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: Counter[str] = Counter()
        self.histograms = {name: LatencyHistogram() for name in self.HISTOGRAMS}

    def add(self, name: str, value: int = 1) -> None:
        with self._lock:
            self.counters[name] += value

    def observe(self, name: str, seconds: float) -> None:
        with self._lock:
            self.histograms[name].observe(seconds)

    def snapshot(self) -> dict:
        with self._lock:
            return {"counters": dict(sorted(self.counters.items())),
                    "latency": {k: h.to_dict() for k, h in self.histograms.items()}}
