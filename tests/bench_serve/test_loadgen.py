"""The load generator against `fxctl sim serve` over real HTTP on 127.0.0.1 (fixed, known delays)."""

import json
import time

import pytest
from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.loadgen.generator import LoadSpec, run
from fxctl.loadgen.metrics import parse_slo, per_token_gaps, percentile
from fxctl.loadgen.workloads import WorkloadSpec
from fxctl.tune.server import ServerProcess, sim_argv

TTFT_S, TPOT_S = 0.100, 0.010   # profiles/fixed-delays.yaml
OUT = 20


@pytest.fixture(scope="module")
def fixed():
    with ServerProcess(sim_argv("fixed-delays", 1.0)) as server:
        yield server.url


@pytest.fixture(scope="module")
def fixed_slow():
    """Twice as slow in wall time: the emulator's own sleep overshoot (1-2 ms a step on a loaded 2-core
    machine) halves in model time, so what is left over is mostly the load generator's error."""
    with ServerProcess(sim_argv("fixed-delays", 2.0)) as server:
        yield server.url


@pytest.fixture(scope="module")
def lab():
    with ServerProcess(sim_argv("lab", 0.01)) as server:
        yield server.url


def short(name="long-context", **kw):
    return WorkloadSpec(name, kw.pop("min_tokens", 256), kw.pop("max_tokens", 256), output_tokens=OUT, **kw)


def test_closed_loop_metrics_match_the_known_delays(fixed_slow):
    r = run(LoadSpec(fixed_slow, short(), concurrency=1, requests=6, warmup=1, time_limit_s=60, time_scale=2.0))
    assert (r["completed"], r["failed"], r["errors"]) == (6, 0, {})
    # client-side figures: the known delays plus this loaded machine's HTTP and scheduling overhead
    assert TTFT_S * 1000 <= r["median_ttft_ms"] <= TTFT_S * 1000 + 15
    assert TPOT_S * 1000 <= r["median_tpot_ms"] <= TPOT_S * 1000 * 1.15
    assert TPOT_S * 1000 * 0.8 <= r["median_itl_ms"] <= TPOT_S * 1000 * 1.25
    e2el = TTFT_S + (OUT - 1) * TPOT_S
    assert e2el * 1000 <= r["median_e2el_ms"] <= e2el * 1000 * 1.15
    assert OUT / e2el / 1.15 <= r["output_throughput"] <= OUT / e2el
    assert 1 / e2el / 1.15 <= r["request_throughput"] <= 1 / e2el
    assert r["total_input_tokens"] == 6 * 256 and r["total_output_tokens"] == 6 * OUT
    # the emulator's own view of the same requests is exact
    assert r["model_median_ttft_ms"] == pytest.approx(TTFT_S * 1000)
    assert r["model_median_e2el_ms"] == pytest.approx(e2el * 1000)


def test_closed_loop_concurrency_multiplies_throughput(fixed):
    """Four clients share the decode steps; a prefill step (100 ms) stalls the others' decodes, and a
    request arriving during one waits for the next: TTFT between one and about three prefill steps."""
    one = run(LoadSpec(fixed, short(), concurrency=1, requests=4, time_limit_s=60, clock="model"))
    four = run(LoadSpec(fixed, short(), concurrency=4, requests=8, time_limit_s=60, clock="model"))
    assert one["median_ttft_ms"] == pytest.approx(100) and one["median_tpot_ms"] == pytest.approx(10)
    assert 100 <= four["median_ttft_ms"] <= 310
    assert 2.5 * one["output_throughput"] <= four["output_throughput"] <= 4 * one["output_throughput"] * 1.01
    assert four["clock"] == "model" and four["wall_clock"]["median_ttft_ms"] >= 100


def test_open_loop_poisson_rate_and_goodput(fixed):
    slo = parse_slo("ttft_p50<=150ms")
    r = run(LoadSpec(fixed, WorkloadSpec("long-context", 64, 64, output_tokens=2),
                     concurrency=None, rate=25, requests=40, time_limit_s=60, slo=slo, seed=3))
    assert r["mode"] == "open" and r["completed"] == 40
    # 40 exponential gaps at 25/s: the run lasts about 1.6 s (+- a few standard deviations of 0.25 s)
    assert 0.8 <= r["duration"] <= 3.0
    assert 0 < r["request_goodput"] <= r["request_throughput"]


def test_prompts_share_no_prefix_unless_asked(lab):
    alone = run(LoadSpec(lab, short(min_tokens=1024, max_tokens=1024), concurrency=4, requests=8, time_scale=0.01))
    assert alone["tier_hits"]["hbm"]["hit_tokens"] == 0
    shared = run(LoadSpec(lab, short(min_tokens=1024, max_tokens=1024, shared_prefix=0.5), concurrency=1,
                          requests=4, time_scale=0.01))
    # every prompt after the first finds the shared half (whole 16-token blocks) in HBM
    hits = shared["tier_hits"]["hbm"]["hit_tokens"]
    assert 3 * 496 <= hits <= 3 * 512


def test_multi_turn_sends_growing_history_that_hits_the_prefix_cache(lab):
    r = run(LoadSpec(lab, short("multi-turn", min_tokens=200, max_tokens=200, turns=3), concurrency=2,
                     requests=2, time_scale=0.01))
    assert r["completed"] == 6 and r["failed"] == 0
    # turns 2 and 3 of each session find the earlier turns in HBM
    assert r["tier_hits"]["hbm"]["hit_rate"] > 0.3


def test_cold_recovery_fills_evicts_and_measures_from_l2(lab):
    r = run(LoadSpec(lab, short("cold-recovery", min_tokens=2048, max_tokens=2048), concurrency=4, requests=8,
                     time_scale=0.01, clock="model", reset_caches=True))
    assert r["phases"]["reset"] == {"reset_prefix_cache": 200, "reset_tiers": 200}
    assert r["phases"]["fill"]["completed"] == 8
    assert r["phases"]["evict"] == {"reset_prefix_cache": 200, "reset_tiers_l1": 200}
    hits = r["tier_hits"]
    assert hits["hbm"]["hit_tokens"] == 0 and hits["l1"]["hits"] == 0
    assert hits["l2"]["hit_rate"] == 1.0 and hits["l2"]["hits"] == 8 * (2048 // 256 - 1)


def test_time_limit_bounds_the_run(fixed):
    started = time.monotonic()
    r = run(LoadSpec(fixed, WorkloadSpec("long-context", 64, 64, output_tokens=400), concurrency=2, requests=10,
                     time_limit_s=1.0))
    assert time.monotonic() - started < 5
    assert r["timed_out"] and r["errors"].get("time limit", 0) >= 1


def test_bench_serve_cli_json_has_vllm_fields(fixed, tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["-o", "json", "bench", "serve", "--url", fixed, "--concurrency", "2",
                                      "--requests", "4", "--prompt-tokens", "128", "--output-tokens", "5",
                                      "--result-file", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("completed", "failed", "duration", "request_throughput", "output_throughput",
                "total_token_throughput", *(f"{s}_{m}_ms" for s in ("mean", "median", "p99")
                                            for m in ("ttft", "tpot", "itl", "e2el"))):
        assert key in data, key
    assert data["completed"] == 4 and json.loads(out.read_text())["completed"] == 4
    table = CliRunner().invoke(cli, ["bench", "serve", "--url", fixed, "--requests", "2", "--prompt-tokens", "64",
                                     "--output-tokens", "3", "--slo", "ttft_p50<=1s"])
    assert table.exit_code == 0 and "TTFT ms" in table.output and "goodput" in table.output


def test_itl_is_per_token_and_percentiles_interpolate():
    assert per_token_gaps([0.0, 0.1, 0.2], 3) == pytest.approx([0.1, 0.1])
    assert per_token_gaps([0.0, 0.4], 5) == pytest.approx([0.1] * 4)   # one chunk of 4 tokens after the first
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        parse_slo("ttft<=3")
    assert [str(x) for x in parse_slo("ttft_p50<=12s, tpot_p99<=200ms")] == ["ttft_p50<=12s", "tpot_p99<=0.2s"]


def test_open_loop_cap_queues_on_the_client_and_reports_it_apart(fixed):
    """A burst (rate far above what one slot serves) behind a cap of 1: requests wait on the client,
    TTFT still counts from the send."""
    r = run(LoadSpec(fixed, WorkloadSpec("long-context", 64, 64, output_tokens=2), concurrency=1, rate=1000,
                     requests=5, time_limit_s=60, clock="model"))
    assert r["completed"] == 5 and r["median_ttft_ms"] == pytest.approx(100)
    # the k-th request waits for k earlier ones of about 110 ms each: mean about 2 x 110 ms
    assert 150 <= r["mean_client_queue_ms"] <= 400
