"""The HTTP server and the virtual-time calibration run the same engine: a cold-recovery workload driven
over HTTP (time-scaled) reports the model-time figures the discrete-event run computes."""

import statistics
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Queue

import pytest

from fxctl.sim.calibrate import Workload, cold_recovery
from fxctl.sim.profile import load_profile
from fxctl.sim.virtual import distinct_prompts

from .support import sim_server, value

PROFILE = "mi308x-qwen3-coder-480b-tp8"
MODEL = "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"
CLIENTS, PROMPTS, TOKENS, OUTPUT = 4, 12, 16384, 16


def closed_loop_over_http(client, prompts: list[list[int]]) -> list[dict]:
    queue: Queue = Queue()
    for p in prompts:
        queue.put(p)

    def worker(_):
        answers = []
        while True:
            try:
                prompt = queue.get_nowait()
            except Empty:
                return answers
            answers.append(client.json("POST", "/v1/completions",
                                       {"model": MODEL, "prompt": prompt, "max_tokens": OUTPUT}))

    with ThreadPoolExecutor(CLIENTS) as pool:
        return [a for answers in pool.map(worker, range(CLIENTS)) for a in answers]


def test_http_cold_recovery_matches_the_discrete_event_run():
    profile = load_profile(PROFILE)
    prompts = distinct_prompts(PROMPTS, TOKENS, 0.25, seed=3)
    workload = Workload(TOKENS, 0.25, OUTPUT, (CLIENTS,), PROMPTS // CLIENTS)
    expected, _ = cold_recovery(profile, workload, CLIENTS, "fxctl", prompts, {})

    with sim_server(PROFILE, time_scale=0.05) as client:
        closed_loop_over_http(client, prompts)  # phase 1: fill L1/L2
        client.json("POST", "/reset_prefix_cache")
        client.json("POST", "/reset_tiers", {"tiers": ["l1"]})
        before = client.metrics()
        answers = closed_loop_over_http(client, prompts)  # phase 3: every prefix comes from L2
        after = client.metrics()

    ttfts = sorted(a["fxctl_sim"]["model_ttft_s"] for a in answers)
    assert all(a["fxctl_sim"]["prompt_tokens_from"].get("l2", 0) > 0 for a in answers)
    l2_hits = value(after, "fxctl_tier_hits_total", tier="l2") - value(before, "fxctl_tier_hits_total", tier="l2")
    assert l2_hits == sum(len(p) // 256 if len(p) % 256 else len(p) // 256 - 1 for p in prompts)
    print(f"HTTP TTFT p50 {statistics.median(ttfts):.3f} s, discrete-event {expected.ttft_p50_s:.3f} s (model time)")
    # clients take wall time to turn around
    assert statistics.median(ttfts) == pytest.approx(expected.ttft_p50_s, rel=0.15)
    assert expected.ttft_p50_s > 1.0  # a real L2 transfer, not noise
