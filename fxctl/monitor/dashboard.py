"""A Grafana dashboard of a deployment: engines (requests/s, TTFT, prefix-cache and connector hit rates),
fxctl's tier (hit rates and bytes/s per tier, L2 fill, errors), the router (requests per worker) and the
arrays (paths, members, degraded). Every query names metrics their exporters declare; PANELS keeps, per
panel, the component whose endpoint exports them (tests/monitor checks each against a real scrape)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from fxctl.data.array_exporter import PREFIX as ARRAY
from fxctl.kvtier.metrics import PREFIX as TIER
from fxctl.monitor.rules import hit_rate
from fxctl.monitor.targets import ARRAY as ARRAY_JOB
from fxctl.monitor.targets import ENGINE, ROUTER
from fxctl.monitor.targets import TIER as TIER_JOB
from fxctl.serve.replica_metrics import ENGINE_COUNTERS, ROUTER_REQUESTS, RUNNING, TTFT, WAITING

SEL = 'deployment=~"$deployment", host=~"$host"'


def ratio(hits: str, queries: str) -> str:
    return f"sum by (instance) (rate({hits}{{{SEL}}}[5m])) / sum by (instance) (rate({queries}{{{SEL}}}[5m]))"


@dataclass(frozen=True)
class Panel:
    title: str
    component: str                       # the job whose targets export these metrics
    queries: tuple[tuple[str, str], ...]  # (PromQL, legend)
    unit: str = "short"


PANELS = (
    Panel("Requests/s", ENGINE, ((f"sum by (instance) (rate({ENGINE_COUNTERS['requests']}{{{SEL}}}[1m]))",
                                  "{{instance}}"),), "reqps"),
    Panel("TTFT p50 / p99", ENGINE, (
        (f"histogram_quantile(0.5, sum by (le, instance) (rate({TTFT}_bucket{{{SEL}}}[5m])))", "p50 {{instance}}"),
        (f"histogram_quantile(0.99, sum by (le, instance) (rate({TTFT}_bucket{{{SEL}}}[5m])))", "p99 {{instance}}")),
        "s"),
    Panel("Requests running / waiting", ENGINE, ((f"sum by (instance) ({RUNNING}{{{SEL}}})", "running {{instance}}"),
                                                 (f"sum by (instance) ({WAITING}{{{SEL}}})", "waiting {{instance}}"))),
    Panel("vLLM prefix cache hit rate (tokens)", ENGINE, (
        (ratio(ENGINE_COUNTERS["prefix_hits"], ENGINE_COUNTERS["prefix_queries"]), "{{instance}}"),), "percentunit"),
    Panel("KV connector hit rate (tokens from LMCache / fxctl's tier)", ENGINE, (
        (ratio(ENGINE_COUNTERS["external_hits"], ENGINE_COUNTERS["external_queries"]), "{{instance}}"),),
        "percentunit"),
    Panel("fxctl tier hit rate per tier", TIER_JOB, ((hit_rate("instance, tier", "{" + SEL + "}"),
                                                      "{{tier}} {{instance}}"),), "percentunit"),
    Panel("fxctl tier bytes/s read and written", TIER_JOB, (
        (f"sum by (instance, tier) (rate({TIER}_read_bytes_total{{{SEL}}}[1m]))", "read {{tier}} {{instance}}"),
        (f"sum by (instance, tier) (rate({TIER}_write_bytes_total{{{SEL}}}[1m]))", "written {{tier}} {{instance}}")),
        "Bps"),
    Panel("fxctl L2 fill", TIER_JOB, ((
        f'{TIER}_usage_bytes{{tier="l2", {SEL}}} / {TIER}_max_capacity_bytes{{tier="l2", {SEL}}}',
        "{{instance}}"),), "percentunit"),
    Panel("fxctl tier errors (5 min)", TIER_JOB, (
        (f"sum by (instance, kind) (increase({TIER}_errors_total{{{SEL}}}[5m]))", "{{kind}} {{instance}}"),)),
    Panel("Router: requests/s per worker", ROUTER, (
        (f"sum by (worker) (rate({ROUTER_REQUESTS}{{{SEL}}}[1m]))", "{{worker}}"),), "reqps"),
    Panel("Arrays: live paths / md members / degraded", ARRAY_JOB, (
        (f'{ARRAY}_controllers{{state="live", host=~"$host"}}', "live paths {{array}}@{{host}}"),
        (f'{ARRAY}_md_members{{host=~"$host"}}', "md members {{array}}@{{host}}"),
        (f'{ARRAY}_degraded{{host=~"$host"}}', "degraded {{array}}@{{host}}"))),
    Panel("Targets up", "", (('up{job=~"fxctl-.*", ' + SEL + "}", "{{job}} {{instance}}"),)),
)


def variable(name: str, query: str) -> dict:
    return {"name": name, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": name}, "definition": query, "refresh": 2,
            "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}}


def dashboard(title: str = "fxctl: tiered KV-cache serving") -> dict:
    panels = []
    for n, panel in enumerate(PANELS):
        panels.append({
            "id": n + 1, "type": "timeseries", "title": panel.title,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (n % 2), "y": 8 * (n // 2)},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                        for i, (expr, legend) in enumerate(panel.queries)]})
    return {
        "title": title, "uid": "fxctl-serving", "schemaVersion": 39, "version": 1, "editable": True,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "10s", "tags": ["fxctl"],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            variable("deployment", 'label_values(up{job=~"fxctl-.*"}, deployment)'),
            variable("host", 'label_values(up{job=~"fxctl-.*"}, host)')]},
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"
