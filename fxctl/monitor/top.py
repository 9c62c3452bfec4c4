"""`fxctl serve top`'s figures: each recorded instance's metrics pages read on its host (engines' /metrics,
the LMCache server's tier endpoint, the router's), two reads apart turned into rates (pure functions).

Per instance: requests/s, TTFT p50 over the interval (vLLM's histogram, interpolated within its bucket as
Prometheus's histogram_quantile does), vLLM's prefix-cache and KV-connector hit rates (tokens), fxctl's tier
hits per tier, bytes/s read and written, errors. Counters that went down (a restart) count from zero.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from fxctl.kvtier.metrics import tier_summary
from fxctl.serve.replica_metrics import ENGINE_COUNTERS, ROUTER_REQUESTS, RUNNING, TTFT, hit_rates
from fxctl.serve.roles import Role


@dataclass
class Page:
    """One instance's page at one moment."""

    host: str
    instance: str          # unit name
    role: str              # engine | lmcache-server | router
    at: float
    text: str | None       # None: it did not answer


@dataclass
class Reading:
    """What a page says, parsed."""

    counters: dict[str, float] = field(default_factory=dict)   # ENGINE_COUNTERS fields, router requests
    running: float = 0.0
    ttft_buckets: dict[float, float] = field(default_factory=dict)   # le -> cumulative count
    tier: dict[str, dict] = field(default_factory=dict)        # tier_summary


def parse(page: Page) -> Reading | None:
    if page.text is None:
        return None
    reading = Reading()
    names = {name: key for key, name in ENGINE_COUNTERS.items()}
    try:
        families = list(text_string_to_metric_families(page.text))
    except ValueError:
        return None
    for family in families:
        for s in family.samples:
            if s.name in names:
                key = names[s.name]
                reading.counters[key] = reading.counters.get(key, 0.0) + s.value
            elif s.name == ROUTER_REQUESTS:
                reading.counters["requests"] = reading.counters.get("requests", 0.0) + s.value
            elif s.name == RUNNING:
                reading.running += s.value
            elif s.name == f"{TTFT}_bucket":
                le = float(s.labels["le"])
                reading.ttft_buckets[le] = reading.ttft_buckets.get(le, 0.0) + s.value
    reading.tier = tier_summary(page.text)
    return reading


def grown(after: float, before: float) -> float:
    """A counter's growth; a counter that went down restarted from zero."""
    return after - before if after >= before else after


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """histogram_quantile over cumulative buckets (le -> count), linear within the bucket; None: no samples."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower_le, lower_count = 0.0, 0.0
    for le, count in ordered:
        if count >= rank:
            if le == float("inf"):
                return lower_le
            width = count - lower_count
            return lower_le + (le - lower_le) * ((rank - lower_count) / width if width else 1.0)
        lower_le, lower_count = le, count
    return lower_le


def rate_row(before: Page, after: Page) -> dict:
    """One instance's figures between two reads of its page."""
    row = {"host": after.host, "instance": after.instance, "role": after.role, "up": after.text is not None}
    old, new = parse(before), parse(after)
    if new is None:
        return row
    seconds = max(after.at - before.at, 1e-6)
    old = old or new   # first seen (or silent) last time: no rate yet, only what it holds now
    delta = {k: grown(v, old.counters.get(k, 0.0)) for k, v in new.counters.items()}
    row["running"] = new.running
    if "requests" in delta:
        row["requests_per_s"] = delta["requests"] / seconds
    if "prefix_queries" in delta:   # an engine's page: vLLM's own prefix cache and its KV connector's share
        row.update({k: v for k, v in hit_rates(delta).items() if v is not None})
    if new.ttft_buckets:
        restarted = sum(new.ttft_buckets.values()) < sum(old.ttft_buckets.values())
        window = {le: c - (0.0 if restarted else old.ttft_buckets.get(le, 0.0)) for le, c in new.ttft_buckets.items()}
        row["ttft_p50_s"] = quantile(0.5, window)
    tiers = {}
    for level, now in new.tier.items():
        was = old.tier.get(level, {})
        hits, misses = (grown(now[k], was.get(k, 0.0)) for k in ("hits", "misses"))
        tiers[level] = {"hits": hits, "misses": misses, "hit_rate": hits / (hits + misses) if hits + misses else None,
                        "read_bytes_per_s": grown(now["read_bytes"], was.get("read_bytes", 0.0)) / seconds,
                        "write_bytes_per_s": grown(now["write_bytes"], was.get("write_bytes", 0.0)) / seconds,
                        "errors": now["errors"], "usage_bytes": now["usage_bytes"],
                        "max_capacity_bytes": now["max_capacity_bytes"]}
    if tiers:
        row["tier"] = tiers
    return row


def read_pages(where, state_dir: str, name: str | None) -> tuple[list[Page], dict[str, str]]:
    """Every recorded instance's page, read on its host; hosts that could not be read -> their error."""
    from fxctl.serve import launch

    def work(machine) -> list[Page]:
        pages = []
        for plan, _mode in launch.saved_plans(machine, state_dir, name):
            if plan.role == Role.ENGINE:
                port = plan.port
            elif plan.role in (Role.LMCACHE_SERVER, Role.ROUTER) and plan.metrics_port:
                port = plan.metrics_port
            else:
                continue
            answer = launch.probe(machine, plan, "/metrics", port=port)["/metrics"]
            pages.append(Page(machine.name, plan.unit, plan.role, time.monotonic(),
                              answer["body"] if answer["status"] == 200 else None))
        return pages

    outcomes = where.with_router().each(work)
    pages = [p for o in outcomes.values() if o.ok for p in o.value]
    return pages, {h: o.error for h, o in outcomes.items() if not o.ok}


def rows_between(before: list[Page], after: list[Page]) -> list[dict]:
    earlier = {(p.host, p.instance): p for p in before}
    return [rate_row(earlier.get((p.host, p.instance), Page(p.host, p.instance, p.role, p.at - 1, None)), p)
            for p in after]
