"""What each replica served and how the router spread it, from their Prometheus pages (pure parsers): the
one place fxctl reads a metrics page into counters (parse_counters) and turns them into hit rates (share).

vLLM's /metrics: requests finished, prompt tokens looked up in its own prefix cache and found there
(`vllm:prefix_cache_queries|hits`), and looked up and found through its KV connector (LMCache, and under it
fxctl's tier: `vllm:external_prefix_cache_queries|hits`). vllm-router's metrics: requests it sent to each
worker (`vllm_router_processed_requests_total{worker=...}`) and each worker's health.
Counters only grow while a process lives: a figure for one run is the difference of two scrapes (`delta`).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fxctl.serve.roles import Role

ENGINE_COUNTERS = {"requests": "vllm:request_success_total", "prefix_queries": "vllm:prefix_cache_queries_total",
                   "prefix_hits": "vllm:prefix_cache_hits_total",
                   "external_queries": "vllm:external_prefix_cache_queries_total",
                   "external_hits": "vllm:external_prefix_cache_hits_total"}
TTFT = "vllm:time_to_first_token_seconds"          # histogram (vLLM and the emulator)
RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
ROUTER_REQUESTS = "vllm_router_processed_requests_total"
ROUTER_HEALTH = "vllm_router_worker_health"


def parse_counters(text: str) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value} for every sample (counters keep `_total`), through
    prometheus_client's parser; labels in the order the text gives them. A page that is not Prometheus
    text yields the samples before the first line the parser rejects."""
    values: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[sample_key(sample.name, sample.labels)] = float(sample.value)
    except ValueError:
        pass
    return values


def sample_key(name: str, labels: dict[str, str]) -> str:
    """'name{k="v",...}' as the exposition writes it (escaped values), or the bare name without labels."""
    if not labels:
        return name
    escaped = (v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in labels.values())
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, escaped)) + "}"


def sum_by_name(counters: dict[str, float], name: str) -> float:
    """Every sample of one metric, whatever its labels (vLLM labels by model, engine, finish reason)."""
    return sum(v for k, v in counters.items() if k == name or k.startswith(name + "{"))


def engine_fields(counters: dict[str, float]) -> dict[str, float]:
    """ENGINE_COUNTERS' fields from parsed counters (parse_counters), each summed over its labels."""
    return {field: sum_by_name(counters, name) for field, name in ENGINE_COUNTERS.items()}


def engine_counters(text: str) -> dict[str, float]:
    return engine_fields(parse_counters(text))


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
    return {"prefix_hit_rate": share(counters.get("prefix_hits", 0.0), counters.get("prefix_queries", 0.0)),
            "external_hit_rate": share(counters.get("external_hits", 0.0), counters.get("external_queries", 0.0))}


def share(part: float, whole: float) -> float | None:
    """part / whole, None when there was nothing (a hit rate with no lookups is unknown, not 0)."""
    return part / whole if whole else None


def tier_hit_rates(before: dict[str, float], after: dict[str, float]) -> dict[str, dict]:
    """Between two scrapes (parse_counters) of an engine's or the tier's page: per tier (l1, l2) the chunks
    hit and missed and the hit rate; vLLM's own prefix cache (hbm) and its KV connector (external) in tokens."""
    def moved(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    rates: dict[str, dict] = {}
    for tier in ("l1", "l2"):
        where = f'{{tier="{tier}"}}'
        hits, misses = moved(f"fxctl_tier_hits_total{where}"), moved(f"fxctl_tier_misses_total{where}")
        rates[tier] = {"hits": hits, "misses": misses, "hit_rate": share(hits, hits + misses)}
    engine = delta(engine_fields(after), engine_fields(before))
    for name, prefix in (("hbm", "prefix"), ("external", "external")):
        hits, queries = engine[f"{prefix}_hits"], engine[f"{prefix}_queries"]
        rates[name] = {"hit_tokens": hits, "query_tokens": queries, "hit_rate": share(hits, queries)}
    return rates


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
