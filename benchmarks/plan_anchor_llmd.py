"""Run in a venv with llm-d-planner 0.3.3 (`pip install 'llm-d-planner[estimation]==0.3.3'`): its own
capacity functions on local config.json files, as JSON on stdout.

Offline, llm-d-planner cannot read a model's weights (it takes them from the Hugging Face hub's safetensors
metadata), so `model_memory_req` is given the weights fxctl estimates (argv: a JSON map config -> GiB);
everything else is llm-d-planner's own code: KVCacheDetail, total_kv_cache_blocks, auto_max_model_len,
max_concurrent_requests, allocatable_kv_cache_memory, with its default gpu_mem_util 0.9 and block size 16.
"""

import json
import sys
from pathlib import Path

import planner.capacity_planner as cp
from transformers import AutoConfig


def main():
    cases = json.loads(sys.stdin.read())
    out = []
    for case in cases:
        path = Path(case["config"])
        config = AutoConfig.for_model(**{k: v for k, v in json.loads(path.read_text()).items()
                                         if k != "quantization_config"})
        cp.model_memory_req = lambda *a, _gib=case["weights_gib"], **k: _gib   # offline: fxctl's weights
        tp, hbm, context = case["tp"], case["hbm_gib"], case["context"]
        detail = cp.KVCacheDetail(path.stem, config, context_len=context)
        allocatable = cp.allocatable_kv_cache_memory(path.stem, config, hbm, 0.9, tp, 1, 1, max_model_len=context)
        out.append(dict(case,
                        per_token_bytes=detail.per_token_memory_bytes,
                        attention=str(detail.attention_type),
                        allocatable_gib=allocatable,
                        kv_tokens=16 * cp.total_kv_cache_blocks(path.stem, config, context, hbm, 0.9, 1, 16, tp),
                        max_model_len=cp.auto_max_model_len(path.stem, config, hbm, 0.9, tp),
                        max_concurrency=cp.max_concurrent_requests(path.stem, config, context, hbm, 0.9, 1, tp)))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
