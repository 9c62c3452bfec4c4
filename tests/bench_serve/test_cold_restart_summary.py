"""The cold-restart benchmark's bookkeeping (no vLLM): rotated orders and the summary over repeats."""

from fxctl.loadgen.cold_restart import compare, orders, summarize_repeats

TEXTS = {0: " the cat", 1: " a dog"}


def result(ttft_ms: float, hits: float, asked: float, fill: dict, measured: dict, texts: dict = TEXTS) -> dict:
    return {"median_ttft_ms": ttft_ms, "output_throughput": 1000 / ttft_ms, "completed": 2, "failed": 0,
            "tier_hits": {"external": {"hit_tokens": hits, "query_tokens": asked}},
            "phases": {"fill": {"logprobs": fill, "texts": TEXTS}}, "logprobs": measured, "texts": texts}


def test_every_variant_takes_every_position():
    got = orders(("recompute", "lmcache-disk", "fxctl"), 3)
    assert {o[0] for o in got} == {"recompute", "lmcache-disk", "fxctl"}
    assert all(sorted(o) == sorted(got[0]) for o in got)


def test_rows_share_of_retrievable_tokens_logprobs_and_same_repeat_ratios():
    same = {0: [-0.5, -1.0], 1: [-0.25, -2.0]}
    off = {0: [-0.5, -1.5], 1: [-0.25, -2.0]}
    first = compare({"recompute": result(1000, 0, 4096, off, off), "fxctl": result(100, 4094, 4096, same, same)})
    second = compare({"recompute": result(2000, 0, 4096, off, off),
                      "fxctl": result(400, 4000, 4096, same, {0: [-0.5, -1.0], 1: [-0.25, -2.5]})})
    rows = {r["variant"]: r for r in summarize_repeats([first, second])}
    fx = rows["fxctl"]
    assert fx["repeats"] == 2 and fx["ttft_ratio_min"] == 0.1 and fx["ttft_ratio_max"] == 0.2
    assert abs(fx["ttft_ratio"] - 0.15) < 1e-9                     # median of the same-repeat ratios
    assert fx["kv_from_connector"] == 4000 / 4094                    # the worst repeat; 4094 of 4094 was 100 %
    assert fx["outputs_match_recompute"] is False                    # differed from its own fill in repeat 2
    assert fx["logprobs_max_diff_vs_recompute_max"] == 0.5 and fx["logprobs_max_diff_vs_fill_max"] == 0.5
    assert rows["recompute"]["kv_from_connector"] == 0.0 and rows["recompute"]["outputs_match_recompute"]


def test_outputs_match_within_the_tolerance_and_only_with_the_same_text():
    from fxctl.loadgen.cold_restart import LOGPROB_TOLERANCE

    fill = {0: [-0.5, -1.0], 1: [-0.25, -2.0]}
    near = {0: [-0.5, -1.0 + LOGPROB_TOLERANCE / 2], 1: [-0.25, -2.0]}
    far = {0: [-0.5, -1.0 + 2 * LOGPROB_TOLERANCE], 1: [-0.25, -2.0]}
    rows = {r["variant"]: r for r in compare({
        "near": result(100, 10, 12, fill, near), "far": result(100, 10, 12, fill, far),
        "other text": result(100, 10, 12, fill, fill, texts={0: " the cat", 1: " a cow"})})}
    assert rows["near"]["outputs_match_recompute"] is True
    assert abs(rows["near"]["logprobs_max_diff_vs_fill"] - LOGPROB_TOLERANCE / 2) < 1e-12
    assert rows["far"]["outputs_match_recompute"] is False
    other = rows["other text"]
    assert other["outputs_match_recompute"] is False and other["logprobs_max_diff_vs_fill"] == 0
