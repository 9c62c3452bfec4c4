"""Real cold recovery: after a full restart of vLLM + LMCache, fxctl's tier as an in-process LMCache plugin
serves every prompt token and the outputs equal recomputation (as the MP server's L2 adapter: test_serve_real);
so does LMCache's own raw_block MP adapter deployed the same way (`fxctl serve
--offload lmcache-raw-block`: an anchor of issue 28, the one with a device file and a slot size fxctl works out;
fs_native and fs are plain JSON specs, checked in test_render and run by the bench); LMCache's in-process
disk tier serves none after the same restart (its index lives in memory). Functional facts only: the speed
figures are printed by `fxctl bench cold-restart` (benchmarks/README.md)."""

from __future__ import annotations

from fxctl.loadgen.cold_restart import ColdRestartSpec, run


def test_fxctl_tier_serves_everything_after_a_restart_lmcache_disk_nothing(serving_python, tiny_model, local_state,
                                                                          tmp_path):
    # no "recompute" variant (no offload): each deployment's own fill phase, run on an empty cache, is the
    # recomputation its outputs after the restart are compared with, and the speed figures it anchors are
    # `fxctl bench cold-restart`'s, not this test's; leaving it out saves two vLLM starts (~2.5 of 10 minutes).
    # No "fxctl" variant either (fxctl's tier in LMCache's MP server, the default deployment): the same
    # restart, with the same checks (every connector-suppliable token from the tier by vLLM's counters, the
    # same text and logprobs), is tests/vllm/test_serve_real.py's; two more vLLM starts saved
    spec = ColdRestartSpec(python=serving_python, model=tiny_model, l2_dir=str(tmp_path / "l2"), prompts=2,
                           prompt_tokens=2048, output_tokens=8, port=8221,
                           variants=("lmcache-disk", "fxctl-in-process", "raw-block"))
    result = run(spec)
    rows = {row["variant"]: row for row in result["rows"]}
    assert set(rows) == {"lmcache-disk", "fxctl-in-process", "raw-block"}
    assert all(row["completed"] == 2 and row["failed"] == 0 for row in rows.values())
    # every prompt token a connector can supply came back after the restart: from fxctl's tier as its
    # in-process plugin behind fxctl's CPU connector, and from LMCache's own raw_block adapter in LMCache's MP
    # server (deployed by fxctl serve --offload lmcache-raw-block)
    for ours in ("fxctl-in-process", "raw-block"):
        assert rows[ours]["kv_from_connector"] == 1.0, ours
        assert rows[ours]["kv_tokens_from_connector"] == 2 * (2048 - 1), ours  # all but each prompt's last
        # ... and the outputs after the restart are what the deployment computed from scratch: the same text,
        # logprobs within LOGPROB_TOLERANCE (identical bits on AVX-512 CPUs; see fxctl.loadgen.cold_restart)
        assert rows[ours]["outputs_match_recompute"] is True, (ours, rows[ours]["logprobs_max_diff_vs_fill"])
    # the same restart leaves LMCache's LocalDiskBackend with nothing (shown, not assumed)
    assert rows["lmcache-disk"]["kv_from_connector"] == 0.0
    assert rows["lmcache-disk"]["outputs_match_recompute"] is True
    # before the restart LMCache's disk tier did hold the prompts: its files are there
    fill = result["repeats"][0]["results"]["lmcache-disk"]["phases"]["fill"]
    assert fill["completed"] == 2
