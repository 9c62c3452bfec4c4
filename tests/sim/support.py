"""Test support: the emulator as a real subprocess on 127.0.0.1, a stdlib HTTP client, a Prometheus parser."""

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


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? '
                    r'([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
KINDS = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_prometheus(text: str) -> dict[tuple[str, frozenset], float]:
    """Strict parse of the text format: every sample belongs to a declared family; histograms are sane."""
    samples: dict[tuple[str, frozenset], float] = {}
    families: dict[str, str] = {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in KINDS and name not in families, line
            families[name] = kind
            continue
        assert not line.startswith("#"), line
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        name, label_text, value = match.group(1), match.group(2) or "", match.group(3)
        family = family_of(name, families)
        assert family, f"sample {name} has no # TYPE"
        labels = frozenset(LABEL.findall(label_text))
        assert (name, labels) not in samples, f"duplicate sample {line}"
        samples[(name, labels)] = float(value.replace("Inf", "inf"))
    check_histograms(samples, families)
    return samples


def family_of(name: str, families: dict[str, str]) -> str | None:
    if name in families:
        return name
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None


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
