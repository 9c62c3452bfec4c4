"""A real Prometheus (Debian's package) started by a test on the files `fxctl serve monitor` wrote, and its
HTTP API: instant queries, alerts, the metric names it holds."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.sshd import free_port


class Prometheus:
    def __init__(self, config_dir: Path, data_dir: Path):
        binary = shutil.which("prometheus")
        if not binary:
            raise FileNotFoundError("prometheus is missing (Debian's prometheus package; .ci/setup installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(data_dir.parent / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config_dir / 'prometheus.yml'}", f"--storage.tsdb.path={data_dir}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=config_dir)
        deadline = time.monotonic() + 60
        while self.get("/-/ready") is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"Prometheus never became ready (see {data_dir.parent / 'prometheus.log'})")
            time.sleep(0.5)

    def get(self, path: str, **params) -> dict | str | None:
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = answer.read().decode()
        except OSError:
            return None
        return json.loads(body) if path.startswith("/api/") else body

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer and answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def alerts(self, state: str = "firing") -> list[dict]:
        answer = self.get("/api/v1/alerts")
        return [a for a in (answer or {}).get("data", {}).get("alerts", []) if a["state"] == state]

    def names(self) -> set[str]:
        answer = self.get("/api/v1/label/__name__/values")
        return set(answer["data"]) if answer else set()

    def targets(self) -> list[str]:
        """Each scrape target's job, health, last scrape's duration and error: what a failed wait shows."""
        answer = self.get("/api/v1/targets")
        return [f"{t['labels'].get('job')}/{t['labels'].get('instance')}: {t['health']} "
                f"({t.get('lastScrapeDuration', 0):.2f} s) {t.get('lastError', '')}".rstrip()
                for t in (answer or {}).get("data", {}).get("activeTargets", [])]

    def wait(self, ready, timeout: float, message: str, every: float = 0.5):
        deadline = time.monotonic() + timeout
        while True:
            got = ready()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{message}; targets: {self.targets()}")
            time.sleep(every)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def panel_metrics(component: str) -> set[str]:
    """The metric names the dashboard's panels of one component (a scrape job) query."""
    from fxctl.monitor.dashboard import PANELS

    names = set()
    for panel in PANELS:
        if panel.component == component:
            for expr, _ in panel.queries:
                names |= set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr))
    return names
