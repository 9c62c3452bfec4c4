"""`fxctl serve top`: its figures from two reads of real pages (pure), and its screen under tmux while
`fxctl bench serve` loads an emulator deployment (fxctl sim serve with fxctl's real tier): the captured
screen names the instance and shows requests/s that move."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fxctl.monitor.top import Page, quantile, rate_row
from tests.support.sshd import free_port
from tests.support.strict_skips import need_tool

REPO = Path(__file__).resolve().parents[2]

ENGINE_BEFORE = """# TYPE vllm:request_success_total counter
vllm:request_success_total{model_name="m",finished_reason="stop"} 10
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 1000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 100
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 5
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 10
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 10
vllm:time_to_first_token_seconds_count{model_name="m"} 10
vllm:time_to_first_token_seconds_sum{model_name="m"} 3
# TYPE fxctl_tier_hits_total counter
fxctl_tier_hits_total{tier="l2"} 4
# TYPE fxctl_tier_misses_total counter
fxctl_tier_misses_total{tier="l2"} 4
# TYPE fxctl_tier_read_bytes_total counter
fxctl_tier_read_bytes_total{tier="l2"} 1000000
"""


def test_rates_between_two_reads():
    after = (ENGINE_BEFORE.replace("} 10\n", "} 30\n").replace("} 1000\n", "} 3000\n").replace("} 100\n", "} 1100\n")
             .replace('le="0.1",model_name="m"} 5', 'le="0.1",model_name="m"} 5')
             .replace('tier="l2"} 4\n# TYPE fxctl_tier_misses', 'tier="l2"} 12\n# TYPE fxctl_tier_misses')
             .replace("} 1000000", "} 9000000"))
    row = rate_row(Page("h", "u", "engine", 100.0, ENGINE_BEFORE), Page("h", "u", "engine", 102.0, after))
    assert row["requests_per_s"] == 10.0                      # 20 more finished in 2 s
    assert row["prefix_hit_rate"] == 0.5                      # 1000 of 2000 more tokens
    # the 20 new TTFTs all fell in (0.1, 1.0]: their median is halfway, as histogram_quantile interpolates
    assert row["ttft_p50_s"] == pytest.approx(0.55)
    assert row["tier"]["l2"]["hits"] == 8 and row["tier"]["l2"]["hit_rate"] == 1.0
    assert row["tier"]["l2"]["read_bytes_per_s"] == 4e6
    restarted = rate_row(Page("h", "u", "engine", 0, after), Page("h", "u", "engine", 1, ENGINE_BEFORE))
    assert restarted["requests_per_s"] == 10.0               # a counter that went down counts from zero
    silent = rate_row(Page("h", "u", "engine", 0, after), Page("h", "u", "engine", 1, None))
    assert silent == {"host": "h", "instance": "u", "role": "engine", "up": False}


def test_quantile_matches_histogram_quantile_on_edges():
    assert quantile(0.5, {}) is None
    assert quantile(0.5, {1.0: 0, float("inf"): 0}) is None
    assert quantile(0.5, {1.0: 4, 2.0: 8, float("inf"): 8}) == 1.0
    assert quantile(0.99, {1.0: 0, float("inf"): 5}) == 1.0      # in +Inf: the highest finite bound



def engine_row(screen: str) -> list[str] | None:
    for line in screen.splitlines():
        if "fxctl-serve-top-0" in line:
            return [cell.strip() for cell in re.split(r"[│┃|]", line)]
    return None


def test_top_under_tmux_during_bench_serve(tmp_path):
    tmux = need_tool("tmux", "tmux")
    env = {**os.environ, "FXCTL_SERVE_STATE": str(tmp_path / "state"), "TERM": "xterm-256color"}
    env.pop("FXCTL_INVENTORY", None)
    for name in ("COLUMNS", "LINES"):   # pytest-xdist's workers set 80x24; rich would believe them, not the pane
        env.pop(name, None)
    port = free_port()

    def fx(*args, timeout=180):
        return subprocess.run([sys.executable, "-m", "fxctl", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    started = fx("serve", "start", "--engine", "sim", "--profile", "lab", "--local", "--name", "top", "--port",
                 str(port), "--time-scale", "0.2", "--l2-dir", str(tmp_path / "l2"))
    assert started.returncode == 0, started.stdout + started.stderr
    session = f"fxtop{port}"
    load = None
    try:
        top = f"{sys.executable} -m fxctl serve top --local --name top --interval 1"
        subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "220", "-y", "30",
                        f"cd {tmp_path} && FXCTL_SERVE_STATE={env['FXCTL_SERVE_STATE']} {top}; sleep 600"],
                       check=True, env=env)
        load = subprocess.Popen([sys.executable, "-m", "fxctl", "-o", "json", "bench", "serve", "--url",
                                 f"http://127.0.0.1:{port}", "--requests", "5000", "--concurrency", "4",
                                 "--prompt-tokens", "512", "--output-tokens", "4", "--shared-prefix", "0.5",
                                 "--time-limit", "60"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        screens, rates = [], []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(rates) < 3 and load.poll() is None:
            time.sleep(1.5)
            screen = subprocess.run([tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                    env=env).stdout
            row = engine_row(screen)
            if row and re.fullmatch(r"\d+\.\d\d", row[4] if len(row) > 4 else ""):
                screens.append(screen)
                rates.append(float(row[4]))
        assert screens, "no screen with the engine's row:\n" + screen + "\nbench: " + str(load.poll()) + \
            (load.stderr.read()[-2000:] if load.poll() is not None else "")
        assert "fxctl serve top" in screens[-1] and "req/s" in screens[-1] and "TTFT p50" in screens[-1]
        assert max(rates) > 0, f"no request counted while bench serve ran: {rates}\n{screens[-1]}"
        assert len(set(screens)) > 1, f"the screen did not refresh: bench {load.poll()} {load.stderr.read()[-2000:]}"
        row = engine_row(screens[-1])
        assert row[1] == "local" and row[3] == "engine"
    finally:
        if load is not None:
            load.kill()
            load.wait()
        subprocess.run([tmux, "kill-session", "-t", session], capture_output=True)
        stopped = fx("-o", "json", "serve", "stop", "--local", "--name", "top")
    assert [s["was_running"] for s in json.loads(stopped.stdout)["stopped"]] == [True]
