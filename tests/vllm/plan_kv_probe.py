"""Run by the serving env's python: vLLM's own KV bytes per token per GPU, from a config.json only.

stdin: a JSON list of {"config": path, "tp": n, "kv_dtype": str}; stdout: the same list, each with
"bytes" (vLLM's page size per block / block size x the rank's layers) and what vLLM read. No weights, no
tokenizer: vLLM's ModelConfig reads the config, its KV cache spec classes size the pages.
A config's quantization_config is dropped (this CPU build refuses FP8 weights; the KV shape does not
depend on it) by copying the config into a temporary folder.
"""

import json
import os
import shutil
import sys
import tempfile

from vllm.config import ModelConfig, ParallelConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec

BLOCK = 16


def kv_torch_dtype(kv_dtype, model_config):
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    return kv_cache_dtype_str_to_dtype(kv_dtype, model_config)


def probe(case, work):
    folder = os.path.join(work, os.path.basename(case["config"]).removesuffix(".json"))
    if not os.path.isdir(folder):
        os.makedirs(folder)
        with open(case["config"]) as src:
            raw = json.load(src)
        raw.pop("quantization_config", None)
        with open(os.path.join(folder, "config.json"), "w") as dst:
            json.dump(raw, dst)
    model = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True, dtype="auto")
    parallel = ParallelConfig(tensor_parallel_size=case["tp"])
    heads = model.get_num_kv_heads(parallel)
    head_size = model.get_head_size()
    layers = model.get_num_layers(parallel)
    dtype = kv_torch_dtype(case["kv_dtype"], model)
    if model.use_mla:
        spec = MLAAttentionSpec(BLOCK, num_kv_heads=heads, head_size=head_size, dtype=dtype,
                                cache_dtype_str=case["kv_dtype"])
    else:
        spec = FullAttentionSpec(BLOCK, num_kv_heads=heads, head_size=head_size, dtype=dtype)
    return dict(case, bytes=spec.page_size_bytes // BLOCK * layers, heads=heads, head_size=head_size,
                layers=layers, mla=bool(model.use_mla))


def main():
    cases = json.load(sys.stdin)
    work = tempfile.mkdtemp(prefix="fxctl-kv-probe-")
    try:
        out = [probe(case, work) for case in cases]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
