"""Test support: the emulator as a real subprocess on 127.0.0.1, a stdlib HTTP client, Prometheus parsing."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30


@contextmanager
def sim_server(profile: str, *extra: str, time_scale: float = 1.0):
    """`python -m fxctl sim serve` on a free port; yields its base URL's (host, port)."""
    cmd = [sys.executable, "-m", "fxctl", "sim", "serve", "--profile", profile, "--port", "0",
           "--time-scale", str(time_scale), *extra]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner, port = read_banner(proc)
        yield Client("127.0.0.1", port, banner)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_banner(proc: subprocess.Popen) -> tuple[str, int]:
    deadline = time.monotonic() + START_TIMEOUT_S
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the emulator exited:\n" + "".join(lines))
        lines.append(line)
        match = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if match:
            return "".join(lines), int(match.group(1))
    raise RuntimeError("the emulator did not come up:\n" + "".join(lines))


class Client:
    def __init__(self, host: str, port: int, banner: str):
        self.host, self.port, self.banner = host, port, banner

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: dict | None = None) -> dict:
        status, _, data = self.request(method, path, body)
        assert status == 200, (status, data)
        return json.loads(data)

    def stream(self, path: str, body: dict) -> tuple[list[dict], list[float], float]:
        """SSE events (parsed, [DONE] excluded), each event's arrival (s after sending), and the total."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            start = time.monotonic()
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200, resp.read()
            assert resp.getheader("Content-Type", "").startswith("text/event-stream")
            assert resp.getheader("X-Fxctl-Emulator") == "simulated-gpu-timing"
            events, times, done = [], [], False
            for raw in resp:
                line = raw.decode().strip()
                if not line:
                    continue
                assert line.startswith("data: "), line
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                events.append(json.loads(data))
                times.append(time.monotonic() - start)
            assert done, "stream ended without [DONE]"
            return events, times, time.monotonic() - start
        finally:
            conn.close()

    def metrics(self) -> dict:
        status, headers, data = self.request("GET", "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        return parse_prometheus(data.decode())


def parse_prometheus(text: str) -> dict[tuple[str, frozenset], float]:
    """Parse the text format with prometheus_client's parser (it refuses malformed lines and samples that do
    not belong to their family), then check what it does not: no duplicate samples, sane histograms."""
    samples: dict[tuple[str, frozenset], float] = {}
    families: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in families, f"family {family.name} declared twice"
        families[family.name] = family.type
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, f"duplicate sample {s.name}{s.labels}"
            samples[key] = s.value
    check_histograms(samples, families)
    return samples


def check_histograms(samples: dict, families: dict[str, str]) -> None:
    for family, kind in families.items():
        if kind != "histogram":
            continue
        buckets = sorted(((float(dict(ls)["le"].replace("+Inf", "inf")), v) for (n, ls), v in samples.items()
                          if n == f"{family}_bucket"))
        counts = [v for _, v in buckets]
        assert buckets and buckets[-1][0] == float("inf"), family
        assert counts == sorted(counts), f"{family} buckets not cumulative"
        count = [v for (n, _), v in samples.items() if n == f"{family}_count"]
        assert count == [counts[-1]], family


def value(samples: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and wanted <= set(ls)]
    assert len(found) == 1, (name, labels, found)
    return found[0]
