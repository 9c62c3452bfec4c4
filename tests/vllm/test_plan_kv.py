"""fxctl plan's KV bytes per token equal vLLM's own computation (issue 29 #4), from config files only.

The serving env's vLLM reads each config.json with its ModelConfig (no weights, no tokenizer) and sizes a
KV page with its own cache spec classes (tests/vllm/plan_kv_probe.py); fxctl.plan.kv must give the same
bytes per token per GPU for six shapes (GQA, GQA MoE, MLA, MHA, GQA with TP above the KV heads, MoE), in
the model's dtype and in FP8, at TP 1, 4 and 8. One vLLM import for all 36 cases (about 15 s).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fxctl.plan.kv import kv_layout
from fxctl.plan.shape import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "plan" / "configs"
PROBE = Path(__file__).with_name("plan_kv_probe.py")
SHAPES = ("llama-3.1-70b", "qwen3-coder-480b-a35b-fp8", "deepseek-v3", "llama-2-7b", "qwen2.5-7b", "mixtral-8x7b")


def test_kv_bytes_per_token_match_vllm(serving_python, tmp_path):
    cases = [{"config": str(CONFIGS / f"{name}.json"), "tp": tp, "kv_dtype": dtype}
             for name in SHAPES for tp in (1, 4, 8) for dtype in ("auto", "fp8")]
    done = subprocess.run([serving_python, str(PROBE)], input=json.dumps(cases), capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    vllm = json.loads(done.stdout)
    assert len(vllm) == len(cases)
    mismatches = []
    for row in vllm:
        ours = kv_layout(load_config(Path(row["config"])), row["kv_dtype"], row["tp"])
        if (ours.per_gpu_bytes, ours.heads_per_rank, ours.head_size, ours.mla) != \
                (row["bytes"], row["heads"], row["head_size"], row["mla"]):
            mismatches.append((Path(row["config"]).stem, row["tp"], row["kv_dtype"], ours.per_gpu_bytes, row["bytes"]))
    assert not mismatches, f"(shape, tp, dtype, fxctl, vLLM): {mismatches}"
    by = {(Path(r["config"]).stem, r["tp"], r["kv_dtype"]): r["bytes"] for r in vllm}
    # planning-facts' table, per GPU: Llama-3.1-70B 327,680 B (BF16, TP1); DeepSeek-V3's latent whole on every rank
    assert by[("llama-3.1-70b", 1, "auto")] == 327_680
    assert by[("deepseek-v3", 8, "auto")] == by[("deepseek-v3", 1, "auto")] == 70_272
    assert by[("qwen3-coder-480b-a35b-fp8", 8, "fp8")] == 126_976 // 8
    assert by[("qwen2.5-7b", 8, "auto")] == by[("qwen2.5-7b", 4, "auto")]   # 4 KV heads: replicated past TP 4
