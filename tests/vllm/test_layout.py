"""fxctl's CPU KV connector against vLLM's own kernel, with negative controls (runs in the serving env)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_layout_learnt_from_the_kernel_reads_back_every_token(serving_python):
    done = subprocess.run([serving_python, str(HERE / "layout_check.py")], capture_output=True, text=True,
                          cwd=HERE.parents[1], env={**os.environ, "PYTHONPATH": str(HERE.parents[1])},
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    cases = json.loads(done.stdout.strip().splitlines()[-1])
    assert {(c["dtype"], c["block_size"]) for c in cases} >= {
        ("bfloat16", 16), ("bfloat16", 128), ("float16", 32), ("float32", 128)}
    for c in cases:
        label = f"{c['dtype']} block {c['block_size']} head {c['head_size']} ({c['isa']})"
        assert c["reads_back"], f"{label}: tokens written by vLLM's kernel do not read back"
        assert c["connector_round_trip"], f"{label}: memory object -> cache -> memory object differs"
        # negative controls: the same check must fail for a wrong layout
        assert not c["wrong_layout_reads_back"]["shifted_token"], f"{label}: a shifted layout went unnoticed"
        if not c["k_row_order"]:
            assert not c["wrong_layout_reads_back"]["row_order_k"], f"{label}: row-order K went unnoticed"
    # on this kind of machine (x86 vector ISA) vLLM stores K transposed: the row-order control is live
    assert any(not c["k_row_order"] for c in cases)
