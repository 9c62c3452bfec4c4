"""fxctl plan's KV accounting beside llm-d-planner 0.3.3's and vLLM's own, on the same six configs (issue 29).

    python -m benchmarks.plan_anchor --llmd-python /tmp/llmd/bin/python [--json out.json]

(llm-d-planner in its own venv: `python3 -m venv /tmp/llmd && /tmp/llmd/bin/pip install
'llm-d-planner[estimation]==0.3.3'`; vLLM's figure comes from the serving env, `fxctl serve install-env`.)
Same configs (tests/plan/configs), same GPU (H200, 141 GB = 131.3 GiB, gpu_memory_utilization 0.9), same
weights (fxctl's estimate, FP8 checkpoints at a byte per parameter, given to llm-d-planner, which offline
cannot read them from the hub), BF16 KV.
The KV tokens are compared on llm-d-planner's OWN allocatable memory, so only the KV accounting differs:
"right" = that memory per GPU / vLLM's per-GPU bytes per token (every GPU holds its share of every token).
Nothing is timed: these are figures, and each is computed by the tool's own code.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from fxctl.paths import serving_env_dir
from fxctl.plan.kv import kv_layout
from fxctl.plan.shape import load_config

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "tests" / "plan" / "configs"
SHAPES = ("llama-3.1-70b", "qwen3-coder-480b-a35b-fp8", "deepseek-v3", "llama-2-7b", "qwen2.5-7b", "mixtral-8x7b")
HBM_GIB = 141e9 / 2**30
GIB = 2**30


def cases() -> list[dict]:
    out = []
    for name in SHAPES:
        shape = load_config(CONFIGS / f"{name}.json")
        context = min(32768, shape.max_position or 32768)
        for tp in (1, 4, 8):
            out.append({"config": str(CONFIGS / f"{name}.json"), "tp": tp, "kv_dtype": "auto", "hbm_gib": HBM_GIB,
                        "context": context, "weights_gib": shape.weight_gb * 1e9 / GIB})
    return out


def run_json(python: str, script: Path, payload: list[dict]) -> list[dict]:
    done = subprocess.run([python, str(script)], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=900, cwd="/tmp")
    if done.returncode:
        raise SystemExit(f"{script.name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def compare(llmd: list[dict], vllm: dict) -> list[dict]:
    rows = []
    for row in llmd:
        shape = load_config(Path(row["config"]))
        ours = kv_layout(shape, "auto", row["tp"])
        key = (row["config"], row["tp"])
        per_gpu_memory = row["allocatable_gib"] * GIB / row["tp"]
        right = int(per_gpu_memory // vllm.get(key, ours.per_gpu_bytes)) if row["allocatable_gib"] else 0
        fxctl_tokens = int(per_gpu_memory // ours.per_gpu_bytes) if row["allocatable_gib"] else 0
        rows.append({"model": Path(row["config"]).stem, "tp": row["tp"], "attention": row["attention"],
                     "vllm_per_gpu_bytes": vllm.get(key), "fxctl_per_gpu_bytes": ours.per_gpu_bytes,
                     "llmd_per_gpu_bytes": row["per_token_bytes"] / row["tp"],
                     "llmd_allocatable_gib": round(row["allocatable_gib"], 1),
                     "right_kv_tokens": right, "fxctl_kv_tokens": fxctl_tokens, "llmd_kv_tokens": row["kv_tokens"],
                     "llmd_over_right": round(row["kv_tokens"] / right, 2) if right else None,
                     "llmd_max_model_len": row["max_model_len"], "llmd_max_concurrency": row["max_concurrency"],
                     "right_max_concurrency": right // row["context"] if right else 0, "context": row["context"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llmd-python", required=True, help="python of a venv with llm-d-planner 0.3.3")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    payload = cases()
    llmd = run_json(args.llmd_python, REPO / "benchmarks" / "plan_anchor_llmd.py", payload)
    serving = serving_env_dir() / "bin" / "python"
    vllm = {}
    if serving.exists():
        probed = run_json(str(serving), REPO / "tests" / "vllm" / "plan_kv_probe.py", payload)
        vllm = {(r["config"], r["tp"]): r["bytes"] for r in probed}
    rows = compare(llmd, vllm)
    print("| model | TP | attention | vLLM B/token/GPU | fxctl | llm-d-planner | KV tokens right | fxctl | "
          "llm-d-planner (x right) | max conc. right / llm-d |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['tp']} | {r['attention']} | {r['vllm_per_gpu_bytes'] or '-'} | "
              f"{r['fxctl_per_gpu_bytes']} | {r['llmd_per_gpu_bytes']:g} | {r['right_kv_tokens']:,} | "
              f"{r['fxctl_kv_tokens']:,} | {r['llmd_kv_tokens']:,} ({r['llmd_over_right'] or '-'}) | "
              f"{r['right_max_concurrency']} / {r['llmd_max_concurrency']} |")
    if args.json:
        args.json.write_text(json.dumps({"hbm_gib": HBM_GIB, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
