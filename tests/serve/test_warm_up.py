"""The warm-up completion `fxctl serve` sends to a vLLM engine once it is ready (fxctl.serve.warm_up): asked as
clients ask (vLLM's first such request after a start costs 1.8-2 s on this CPU build; benchmarks/README.md),
reported, and never a reason to fail a start. A real HTTP server on this machine stands in for vLLM's API;
the real engine's warm-up is checked in tests/vllm/test_serve_real.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fxctl.remote.machine import LocalMachine
from fxctl.serve.render import plan_instances
from fxctl.serve.roles import Role
from fxctl.serve.settings import settings_from
from fxctl.serve.warm_up import warm_up
from fxctl.sim.profile import load_profile


@pytest.fixture
def api():
    """An HTTP server answering POST /v1/completions with a short event stream (or `status`), keeping what
    it was sent."""
    seen: dict = {"bodies": [], "status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):   # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen["bodies"].append((self.path, json.loads(body)))
            self.send_response(seen["status"])
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if seen["status"] == 200:
                self.wfile.write(b'data: {"choices": [{"text": "x"}]}\n\ndata: [DONE]\n\n')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["port"] = server.server_address[1]
    yield seen
    server.shutdown()
    server.server_close()


def plans(tmp_path, engine: str, port: int):
    import dataclasses

    settings = settings_from(load_profile("cpu-tiny"), engine=engine, l2_dir=str(tmp_path / "l2"),
                             python="/usr/bin/python3", state_dir=str(tmp_path / "state"), name="wu")
    return [dataclasses.replace(p, port=port) for p in plan_instances(settings, "local")]


def test_a_ready_vllm_engine_gets_one_streamed_completion_with_logprobs(api, tmp_path):
    server, engine = plans(tmp_path, "vllm", api["port"])
    said = warm_up(LocalMachine(), engine, "tiny-llama", 30)
    assert said.startswith("warmed up: one streamed completion (16 tokens, logprobs) in "), said
    ((path, body),) = api["bodies"]
    assert path == "/v1/completions"
    assert (body["model"], body["stream"], body["logprobs"], body["max_tokens"], body["temperature"]) == \
        ("tiny-llama", True, 1, 16, 0)
    assert len(body["prompt"].split()) < 8   # far shorter than a KV chunk: LMCache stores nothing of it
    assert warm_up(LocalMachine(), server, "tiny-llama", 30) == ""   # LMCache's server: not an engine
    assert len(api["bodies"]) == 1


def test_a_failed_warm_up_is_reported_and_does_not_raise(api, tmp_path):
    _, engine = plans(tmp_path, "vllm", api["port"])
    api["status"] = 500
    said = warm_up(LocalMachine(), engine, "tiny-llama", 30)
    assert said.startswith("warm-up request failed (HTTPError: HTTP Error 500") and "engine is ready" in said


def test_nothing_listening_is_a_reported_failure(tmp_path):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    _, engine = plans(tmp_path, "vllm", port)
    said = warm_up(LocalMachine(), engine, "tiny-llama", 5)
    assert said.startswith("warm-up request failed (URLError"), said


def test_the_emulator_is_not_warmed_up(api, tmp_path):
    engines = [p for p in plans(tmp_path, "sim", api["port"]) if p.role == Role.ENGINE]
    assert engines and all(warm_up(LocalMachine(), p, "m", 5) == "" for p in engines)
    assert api["bodies"] == []
