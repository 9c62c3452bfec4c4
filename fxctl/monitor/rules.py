"""Prometheus rules for a deployment: recording rules for the figures operators read (per-tier hit rates,
bytes read) and alert rules (a target not answering, tier errors rising, L2 near its cap, the hit rate
collapsing after a restart, an array degraded). Every expression names metrics their exporters declare:
fxctl.kvtier.metrics (the tier), fxctl.data.array_exporter (the array), Prometheus's own `up`."""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.data.array_exporter import PREFIX as ARRAY
from fxctl.kvtier.metrics import PREFIX as TIER
from fxctl.monitor.targets import JOBS
from fxctl.monitor.targets import TIER as TIER_JOB

BY = "host, deployment, instance"
JOB_RE = "|".join(JOBS)
L2 = '{tier="l2"}'



@dataclass(frozen=True)
class Thresholds:
    """What the alerts compare with; `for_s`: how long a condition holds before its alert fires."""

    for_s: int = 60
    l2_full: float = 0.9            # L2 usage over its capacity
    hit_rate_floor: float = 0.2     # L2 hit rate under this ...
    restart_window_s: int = 1800    # ... within this long after the tier's process started


def hit_rate(by: str, selector: str = "", window: str = "5m") -> str:
    """The tier's hit rate (chunks found over looked up) summed by `by`; `selector`: '{tier="l2"}' ..."""
    hits = f"rate({TIER}_hits_total{selector}[{window}])"
    misses = f"rate({TIER}_misses_total{selector}[{window}])"
    return f"sum by ({by}) ({hits}) / sum by ({by}) ({hits} + {misses})"


RECORDING = [
    {"record": "fxctl:tier_hit_rate:rate5m", "expr": hit_rate(f"{BY}, tier")},
    {"record": "fxctl:tier_read_bytes:rate5m", "expr": f"sum by ({BY}, tier) (rate({TIER}_read_bytes_total[5m]))"},
    {"record": "fxctl:tier_errors:increase5m", "expr": f"sum by ({BY}, kind) (increase({TIER}_errors_total[5m]))"},
]


def alerts(t: Thresholds) -> list[dict]:
    hold = f"{t.for_s}s"
    return [
        {"alert": "FxctlTargetDown", "expr": f'up{{job=~"{JOB_RE}"}} == 0', "for": hold,
         "labels": {"severity": "critical"},
         "annotations": {"summary": "{{ $labels.instance }} ({{ $labels.job }}) does not answer its /metrics",
                         "description": "An engine, the tier's LMCache server, the router or an array exporter is "
                                        "down or unreachable: fxctl serve status / systemctl status on the host."}},
        {"alert": "FxctlTierErrors", "expr": f"sum by ({BY}, kind) (increase({TIER}_errors_total[5m])) > 0",
         "for": hold, "labels": {"severity": "warning"},
         "annotations": {"summary": "fxctl's tier on {{ $labels.instance }}: {{ $value | humanize }} L2 "
                                    "{{ $labels.kind }} errors in 5 minutes",
                         "description": "Reads become misses and writes are skipped (serving goes on, slower): "
                                        "check the array's mount and the L2 directory."}},
        {"alert": "FxctlTierL2NearCap",
         "expr": f'max by ({BY}) ({TIER}_usage_bytes{{tier="l2"}} / {TIER}_max_capacity_bytes{{tier="l2"}}) '
                 f"> {t.l2_full:g}",
         "for": hold, "labels": {"severity": "warning"},
         "annotations": {"summary": "fxctl's L2 on {{ $labels.instance }} is {{ $value | humanizePercentage }} "
                                    "full",
                         "description": "Eviction keeps it within its cap; a cap too small for the working set "
                                        "shows as a falling hit rate (fxctl plan sizes it)."}},
        {"alert": "FxctlTierHitRateCollapsed",
         "expr": f"({hit_rate(BY, L2)}) < {t.hit_rate_floor:g} and on ({BY}) "
                 f'(time() - process_start_time_seconds{{job="{TIER_JOB}"}}) < {t.restart_window_s}',
         "for": hold, "labels": {"severity": "warning"},
         "annotations": {"summary": "fxctl's L2 hit rate on {{ $labels.instance }} is "
                                    "{{ $value | humanizePercentage }} since its server restarted",
                         "description": "After a restart the tier should find what it stored: a collapse means "
                                        "its L2 directory, model or chunk keys changed (fxctl_tier_model_"
                                        "mismatches_total counts KV kept for other weights)."}},
        {"alert": "FxctlArrayDegraded", "expr": f"{ARRAY}_degraded == 1", "for": hold,
         "labels": {"severity": "critical"},
         "annotations": {"summary": "array {{ $labels.array }} on {{ $labels.host }} is degraded",
                         "description": "A path (NVMe-oF controller), an md member, the md device or the mount is "
                                        "missing: fxctl provision --check names it; RAID0 loses data past the "
                                        "kernel's give-up (ctrl_loss_tmo)."}},
    ]


def rule_file(t: Thresholds) -> dict:
    return {"groups": [{"name": "fxctl-recording", "rules": RECORDING},
                       {"name": "fxctl-alerts", "rules": alerts(t)}]}
