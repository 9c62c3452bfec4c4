"""What each replica served and how the router spread it, from their Prometheus pages (pure parsers).

vLLM's /metrics: requests finished, prompt tokens looked up in its own prefix cache and found there
(`vllm:prefix_cache_queries|hits`), and looked up and found through its KV connector (LMCache, and under it
fxctl's tier: `vllm:external_prefix_cache_queries|hits`). vllm-router's metrics: requests it sent to each
worker (`vllm_router_processed_requests_total{worker=...}`) and each worker's health.
Counters only grow while a process lives: a figure for one run is the difference of two scrapes (`delta`).
"""

from __future__ import annotations

from fxctl.loadgen.metrics import parse_counters
from fxctl.serve.roles import Role

ENGINE_COUNTERS = {"requests": "vllm:request_success_total", "prefix_queries": "vllm:prefix_cache_queries_total",
                   "prefix_hits": "vllm:prefix_cache_hits_total",
                   "external_queries": "vllm:external_prefix_cache_queries_total",
                   "external_hits": "vllm:external_prefix_cache_hits_total"}
TTFT = "vllm:time_to_first_token_seconds"          # histogram (vLLM and the emulator)
RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
ROUTER_REQUESTS = "vllm_router_processed_requests_total"
ROUTER_HEALTH = "vllm_router_worker_health"


def sum_by_name(counters: dict[str, float], name: str) -> float:
    """Every sample of one metric, whatever its labels (vLLM labels by model, engine, finish reason)."""
    return sum(v for k, v in counters.items() if k == name or k.startswith(name + "{"))


def engine_counters(text: str) -> dict[str, float]:
    counters = parse_counters(text)
    return {field: sum_by_name(counters, name) for field, name in ENGINE_COUNTERS.items()}


def label_value(key: str, label: str) -> str | None:
    marker = f'{label}="'
    if marker not in key:
        return None
    return key.split(marker, 1)[1].split('"', 1)[0]


def router_counters(text: str) -> dict[str, dict[str, float]]:
    """worker URL -> {requests, healthy} from vllm-router's metrics page."""
    out: dict[str, dict[str, float]] = {}
    for key, value in parse_counters(text).items():
        for name, field in ((ROUTER_REQUESTS, "requests"), (ROUTER_HEALTH, "healthy")):
            worker = label_value(key, "worker") if key.startswith(name + "{") else None
            if worker:
                out.setdefault(worker, {"requests": 0.0, "healthy": 0.0})[field] += value
    return out


def delta(after: dict[str, float], before: dict[str, float] | None) -> dict[str, float]:
    before = before or {}
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def hit_rates(counters: dict[str, float]) -> dict[str, float | None]:
    """Share of prompt tokens found in vLLM's own prefix cache, and of those it then asked its connector
    for, the share the connector had."""
    own = counters["prefix_hits"] / counters["prefix_queries"] if counters.get("prefix_queries") else None
    ext = counters["external_hits"] / counters["external_queries"] if counters.get("external_queries") else None
    return {"prefix_hit_rate": own, "external_hit_rate": ext}


def summed(rows: list[dict[str, float]]) -> dict[str, float]:
    """Counters of several engines added up (one host's, or the whole deployment's)."""
    total: dict[str, float] = {}
    for row in rows:
        for k, v in row.items():
            total[k] = total.get(k, 0.0) + v
    return total


def sum_tiers(tiers: list[dict]) -> dict:
    """fxctl's tier summaries (fxctl.kvtier.metrics.tier_summary) of one host's processes added up: counts
    and bytes add, rates are recomputed."""
    out: dict[str, dict] = {}
    for tier in tiers:
        for level, row in (tier or {}).items():
            acc = out.setdefault(level, {})
            for k, v in row.items():
                if isinstance(v, (int, float)) and k not in ("hit_rate", "mean_read_s"):
                    acc[k] = acc.get(k, 0.0) + v
    for row in out.values():
        looked = row.get("hits", 0.0) + row.get("misses", 0.0)
        row["hit_rate"] = row.get("hits", 0.0) / looked if looked else None
    return out


def host_summaries(statuses) -> list[dict]:
    """One row per host from `fxctl serve status`'s instances (fxctl.serve.launch.InstanceStatus): engines
    ready, their vLLM counters summed, and fxctl's tier summed over the host's processes that export it."""
    rows: dict[str, dict] = {}
    for s in statuses:
        if s.role == Role.ROUTER:
            continue
        row = rows.setdefault(s.host, {"host": s.host, "engines": 0, "ready": 0, "served": [], "tiers": []})
        if s.role == Role.ENGINE:
            row["engines"] += 1
            row["ready"] += s.state == "ready"
            if s.load:
                row["served"].append(s.load)
        if s.tier:
            row["tiers"].append(s.tier)
    out = []
    for row in rows.values():
        served = summed(row.pop("served"))
        tiers = row.pop("tiers")
        out.append({**row, "served": {**served, **hit_rates(served)} if served else None,
                    "tier": sum_tiers(tiers) if tiers else None})
    return out
