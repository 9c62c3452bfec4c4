"""Real vLLM on CPU in LMCache's multi-process mode: an `lmcache server` with fxctl's tier as its L2 adapter
(fxctl.kvtier.lmcache_server.server_argv) and vLLM with LMCacheMPConnector (kv_transfer_config). LMCache's
worker adapter takes its engine-driven copy path for CPU tensors, which the server accepts with
--supported-transfer-mode auto. A 2,048-token prompt is stored through the server into fxctl's L2; after
both vLLM and the server restart, vLLM gets every prompt token but the last from its connector, all from
fxctl's L2, and greedy output and logprobs are those it computed from scratch."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from fxctl.bench.metrics import parse_counters
from fxctl.kvtier.lmcache_server import health_url, kv_transfer_config, metrics_url, server_argv, server_environment

REPO = Path(__file__).resolve().parents[2]
PROMPT_TOKENS, CHUNK = 2048, 256


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, log: Path, env: dict) -> subprocess.Popen:
    with open(log, "a") as out:
        return subprocess.Popen(argv, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{proc.args[:4]} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    pytest.fail(f"not ready in {timeout} s: {url}\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return parse_counters(resp.read().decode())


def total(found: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in found.items() if k.startswith(prefix + "{") or k == prefix)


def complete(port: int, model: str, tokens: list[int]) -> tuple[str, list[float]]:
    body = json.dumps({"model": model, "prompt": tokens, "max_tokens": 8, "temperature": 0, "logprobs": 1})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body.encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        choice = json.loads(resp.read())["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]


def test_vllm_on_cpu_reads_a_prompt_back_from_fxctls_tier_through_the_mp_server(serving_python, tiny_model,
                                                                                  tmp_path):
    zmq_port, http_port, metrics_port, vllm_port = (free_port() for _ in range(4))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}
    server_cmd = server_argv(serving_python, zmq_port, 256 << 20, str(tmp_path / "fxtier"), 1 << 30, metrics_port,
                             http_port=http_port, tier={"segment_bytes": 256 << 20})
    vllm_cmd = [serving_python, "-m", "vllm.entrypoints.openai.api_server", "--model", tiny_model,
                "--port", str(vllm_port), "--max-model-len", "4096", "--max-num-seqs", "4",
                "--kv-transfer-config", json.dumps(kv_transfer_config(zmq_port))]
    rng = random.Random(7)
    tokens = [rng.randrange(10, 4000) for _ in range(PROMPT_TOKENS)]
    outputs, seen = [], []
    server = engine = None
    try:
        for _phase in range(2):   # the second phase after both processes restarted
            server = start(server_cmd, tmp_path / "server.log", {**env, **server_environment()})
            wait_ready(health_url(http_port), server, tmp_path / "server.log", 240)
            engine = start(vllm_cmd, tmp_path / "vllm.log", {**env, "VLLM_CPU_KVCACHE_SPACE": "1"})
            wait_ready(f"http://127.0.0.1:{vllm_port}/health", engine, tmp_path / "vllm.log", 600)
            outputs.append(complete(vllm_port, tiny_model, tokens))
            time.sleep(2)  # the store completes after the response
            seen.append((counters(f"http://127.0.0.1:{vllm_port}/metrics"), counters(metrics_url(metrics_port))))
            stop(engine)
            stop(server)
    finally:
        stop(engine)
        stop(server)
    (first_vllm, first_tier), (again_vllm, again_tier) = seen
    chunks = PROMPT_TOKENS // CHUNK
    assert first_tier['fxctl_tier_stored_chunks_total{tier="l2"}'] == chunks
    assert total(first_vllm, "vllm:external_prefix_cache_hits_total") == 0
    assert total(again_vllm, "vllm:external_prefix_cache_hits_total") == PROMPT_TOKENS - 1  # vLLM computes the last
    assert again_tier['fxctl_tier_hits_total{tier="l2"}'] == chunks
    assert outputs[1] == outputs[0]
