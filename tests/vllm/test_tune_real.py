"""`fxctl tune` against the real engine: vLLM + LMCache + fxctl's tier (re)started per server setting on this
machine's CPU, a concurrency search under an SLO, and the no-offload baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_tune_real_vllm_finds_a_best_point_and_compares_with_no_offload(serving_python, tiny_model, local_state,
                                                                        tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "fxctl", "-o", "json", "tune", "--target", "vllm", "--profile", "cpu-tiny",
         "--python", serving_python, "--model", tiny_model, "--l2-dir", str(tmp_path / "l2"),
         "--workload", "cold-recovery", "--slo", "ttft_p50<=60s", "--baseline", "no-offload",
         "--param", "tiers.l1_size_gb=0.25", "--concurrency", "1,2,4", "--start", "2",
         "--requests-per-client", "1", "--prompt-tokens", "1536", "--output-tokens", "8",
         "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=2400, env=os.environ.copy())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["best"] is not None and summary["best"]["concurrency"] in (1, 2, 4)
    assert summary["baseline"] is not None
    trials = [json.loads(p.read_text()) for p in run_dir.rglob("*.json") if p.parent.name == "trials"]
    assert trials and all(t["target"] == "vllm" for t in trials)
    assert all(t["result"]["completed"] >= 1 and t["result"]["failed"] == 0 for t in trials)
    # the baseline ran with KV offload off: a deployment of its own, recompute only
    baseline = [t for t in trials if t["kind"] == "baseline"]
    assert baseline and baseline[0]["settings"].get("serving.offload") is False
    left = subprocess.run(["pgrep", "-f", "vllm.entrypoints.openai.api_server --model " + tiny_model],
                          capture_output=True, text=True).stdout.split()
    assert left == [], f"tune left vLLM running: {left}"
