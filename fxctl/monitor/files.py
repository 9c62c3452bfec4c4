"""The files `fxctl serve monitor` writes: prometheus.yml (a scrape job per component, its targets
labelled), fxctl-rules.yml (recording and alert rules) and fxctl-dashboard.json (Grafana)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from fxctl.errors import BadInput
from fxctl.monitor.dashboard import dashboard_json
from fxctl.monitor.rules import Thresholds, rule_file
from fxctl.monitor.targets import JOBS, Target

SCRAPE_FILE, RULES_FILE, DASHBOARD_FILE = "prometheus.yml", "fxctl-rules.yml", "fxctl-dashboard.json"


def scrape_config(targets: list[Target], interval_s: int = 15) -> dict:
    jobs = []
    for job in JOBS:
        mine = [t for t in targets if t.job == job]
        if mine:
            jobs.append({"job_name": job, "metrics_path": "/metrics", "honor_labels": False,
                         "static_configs": [{"targets": [t.address], "labels": t.labels} for t in mine]})
    return {"global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
            "rule_files": [RULES_FILE], "scrape_configs": jobs}


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=200)


def render(targets: list[Target], thresholds: Thresholds, interval_s: int = 15) -> dict[str, str]:
    """File name -> content."""
    return {SCRAPE_FILE: "# written by fxctl serve monitor\n" + dump(scrape_config(targets, interval_s)),
            RULES_FILE: "# written by fxctl serve monitor\n" + dump(rule_file(thresholds)),
            DASHBOARD_FILE: dashboard_json()}


def write(directory: str, files: dict[str, str]) -> list[str]:
    """Each file replaced whole (written beside it, then renamed): a Prometheus reloading never reads half."""
    out = Path(directory)
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = out / name
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
            written.append(str(path))
    except OSError as exc:
        raise BadInput(f"cannot write the monitor files in {directory}: {exc.strerror or exc}",
                       "pass --out a directory you may write (it is made when missing)") from None
    return written
