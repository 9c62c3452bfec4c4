"""Real HTTP against `fxctl sim serve` running as a subprocess on 127.0.0.1."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from fxctl.sim.profile import PROFILE_DIR
from fxctl.sim.tokens import chat_prompt, output_piece, tokenize

from .support import sim_server, value

MODEL = "fxctl-sim/lab-0.5b"
LONG_TEXT = " ".join(f"section{i} of the design notes says the KV tier keeps hot prefixes" for i in range(60))


@pytest.fixture(scope="module")
def lab():
    with sim_server("lab") as client:
        yield client


def test_banner_models_health_and_every_response_say_emulator(lab):
    assert "EMULATOR" in lab.banner and "simulated GPU timing" in lab.banner
    models = lab.json("GET", "/v1/models")
    assert [m["id"] for m in models["data"]] == [MODEL]
    status, headers, _ = lab.request("GET", "/health")
    assert status == 200 and headers["X-Fxctl-Emulator"] == "simulated-gpu-timing"


def test_non_streaming_completion_counts_tokens(lab):
    prompt = "Tiered KV caches move cold prefixes to NVMe-oF."
    body = lab.json("POST", "/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 7})
    assert body["object"] == "text_completion"
    assert body["usage"] == {"prompt_tokens": len(tokenize(prompt)), "completion_tokens": 7,
                             "total_tokens": len(tokenize(prompt)) + 7,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    assert body["choices"][0]["text"] == "".join(output_piece(i) for i in range(7))
    assert body["choices"][0]["finish_reason"] == "length"
    assert 0 < body["fxctl_sim"]["model_ttft_s"] < body["fxctl_sim"]["model_e2e_s"]


def test_streaming_completion_with_usage_chunk(lab):
    ids = list(range(500, 800))
    events, times, _ = lab.stream("/v1/completions", {
        "model": MODEL, "prompt": ids, "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}})
    tokens, usage = events[:-1], events[-1]
    assert [e["choices"][0]["text"] for e in tokens] == [output_piece(i) for i in range(5)]
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * 4 + ["length"]
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 300
    assert usage["usage"]["completion_tokens"] == 5
    assert times == sorted(times)


def test_streaming_chat_starts_with_the_assistant_role_and_counts_the_template(lab):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is L2?"}]
    events, _, _ = lab.stream("/v1/chat/completions", {
        "model": MODEL, "messages": messages, "max_tokens": 3, "stream": True,
        "stream_options": {"include_usage": True}})
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(e["choices"][0]["delta"]["content"] for e in events[:-1]) == "the cache tier"
    assert events[-1]["usage"]["prompt_tokens"] == len(tokenize(chat_prompt(messages)))


def test_bad_requests_are_refused_like_vllm(lab):
    status, _, body = lab.request("POST", "/v1/completions", {"model": "gpt-4", "prompt": "x"})
    assert status == 404 and "does not exist" in json.loads(body)["message"]
    status, _, _ = lab.request("POST", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0})
    assert status == 400
    status, _, _ = lab.request("POST", "/v1/chat/completions", {"model": MODEL, "messages": []})
    assert status == 400
    status, _, body = lab.request("POST", "/v1/completions", {"model": MODEL, "prompt": [1] * 40_000})
    assert status == 400 and "context length" in json.loads(body)["message"]


def test_metrics_parse_and_count_prefix_hits_then_tier_hits(lab):
    before = lab.metrics()
    request = {"model": MODEL, "prompt": LONG_TEXT, "max_tokens": 2}
    first = lab.json("POST", "/v1/completions", request)
    second = lab.json("POST", "/v1/completions", request)
    after = lab.metrics()
    hits = value(after, "vllm:prefix_cache_hits_total") - value(before, "vllm:prefix_cache_hits_total")
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0.9 * second["usage"]["prompt_tokens"]
    assert hits == second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert value(after, "vllm:time_to_first_token_seconds_count") >= 2
    assert value(after, "vllm:num_requests_running") == 0

    assert lab.json("POST", "/reset_prefix_cache")["reset"] == "hbm_prefix_cache"
    from_l1 = lab.json("POST", "/v1/completions", request)
    assert from_l1["fxctl_sim"]["prompt_tokens_from"].get("l1", 0) > 0
    l1_hits = (value(lab.metrics(), "fxctl_tier_hits_total", tier="l1")
               - value(after, "fxctl_tier_hits_total", tier="l1"))
    assert l1_hits == from_l1["fxctl_sim"]["prompt_tokens_from"]["l1"] // 256

    lab.json("POST", "/reset_prefix_cache")
    assert set(lab.json("POST", "/reset_tiers", {"tiers": ["l1", "l2"]})["chunks_dropped"]) == {"l1", "l2"}
    misses_before = value(lab.metrics(), "fxctl_tier_misses_total", tier="l2")
    cold = lab.json("POST", "/v1/completions", request)
    assert cold["fxctl_sim"]["prompt_tokens_from"] == {"hbm_prefix_cache": 0}
    assert value(lab.metrics(), "fxctl_tier_misses_total", tier="l2") > misses_before


def test_fixed_delays_give_known_ttft_and_tpot_in_wall_and_model_time():
    with sim_server("fixed-delays") as client:
        events, times, total = client.stream("/v1/completions", {
            "model": "fxctl-sim/fixed-delays", "prompt": "hello", "max_tokens": 21, "stream": True,
            "stream_options": {"include_usage": True}})
        figures = events[-1]["fxctl_sim"]
        assert figures["model_ttft_s"] == pytest.approx(0.100, abs=1e-6)
        assert (figures["model_e2e_s"] - figures["model_ttft_s"]) / 20 == pytest.approx(0.010, abs=1e-6)
        assert 0.095 <= times[0] <= 0.3            # wall TTFT: 100 ms plus this busy machine's slack
        tpot_wall = (times[20] - times[0]) / 20
        assert 0.009 <= tpot_wall <= 0.03


def test_time_scale_shrinks_wall_time_but_not_reported_model_time():
    with sim_server("fixed-delays", time_scale=0.5) as client:
        events, times, _ = client.stream("/v1/completions", {
            "model": "fxctl-sim/fixed-delays", "prompt": "hello", "max_tokens": 2, "stream": True,
            "stream_options": {"include_usage": True}})
        assert events[-1]["fxctl_sim"]["model_ttft_s"] == pytest.approx(0.100, abs=1e-6)
        assert 0.045 <= times[0] <= 0.09


def test_preemption_over_http_when_hbm_is_full(tmp_path):
    profile = yaml.safe_load((PROFILE_DIR / "lab.yaml").read_text())
    profile["serving"]["num_gpu_blocks"] = 200  # 3200 tokens of KV for 4 x (900 + 400)
    path = tmp_path / "tiny-hbm.yaml"
    path.write_text(yaml.safe_dump(profile))
    # the four requests must overlap in the engine: flat out (time_scale 0) each took ~10 ms of wall time, so a
    # thread arriving late on a busy machine found the others done (CI, once); at 0.2 each lasts ~1 s
    with sim_server(str(path), "--no-offload", time_scale=0.2) as client:
        def one(i):
            return client.json("POST", "/v1/completions", {
                "model": MODEL, "prompt": list(range(10_000 * (i + 1), 10_000 * (i + 1) + 900)), "max_tokens": 400})
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(one, range(4)))
        assert all(a["usage"]["completion_tokens"] == 400 for a in answers)
        assert sum(a["fxctl_sim"]["preemptions"] for a in answers) > 0
        metrics = client.metrics()
        assert value(metrics, "vllm:num_preemptions_total") == sum(a["fxctl_sim"]["preemptions"] for a in answers)
        assert value(metrics, "vllm:kv_cache_usage_perc") == 0


def test_a_client_that_goes_away_frees_its_request(lab):
    import http.client
    import time

    conn = http.client.HTTPConnection("127.0.0.1", lab.port, timeout=30)
    conn.request("POST", "/v1/completions", body=json.dumps({
        "model": MODEL, "prompt": "a long answer please", "max_tokens": 5000, "stream": True}),
        headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.readline().startswith(b"data: ")
    conn.close()  # hang up mid-stream
    for _ in range(100):
        metrics = lab.metrics()
        if value(metrics, "vllm:num_requests_running") == 0:
            break
        time.sleep(0.05)
    assert value(metrics, "vllm:num_requests_running") == 0
    assert value(metrics, "vllm:kv_cache_usage_perc") == 0
