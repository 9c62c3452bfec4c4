"""fxctl.plan.shape and .kv: config.json read into a shape, KV bytes per token (issue 29 #1, #2).

The parameter counts are the models' published ones (model cards); the KV figures are planning-facts'
table. tests/vllm/test_plan_kv.py checks the same KV formula against vLLM's own computation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxctl.errors import BadInput
from fxctl.plan.kv import kv_layout
from fxctl.plan.shape import load_config, parse_config

CONFIGS = Path(__file__).with_name("configs")


@pytest.mark.parametrize("name, total_b, active_b", [
    ("llama-3.1-70b", 70.55, 70.55), ("qwen3-coder-480b-a35b-fp8", 480.1, 35.4), ("deepseek-v3", 671.0, 37.4),
    ("llama-2-7b", 6.74, 6.74), ("qwen2.5-7b", 7.62, 7.62), ("mixtral-8x7b", 46.7, 12.9)])
def test_parameter_counts_match_the_model_cards(name, total_b, active_b):
    shape = load_config(CONFIGS / f"{name}.json")
    assert shape.params_b == pytest.approx(total_b, rel=0.01)
    assert shape.active_params_b == pytest.approx(active_b, rel=0.01)


def test_fp8_checkpoints_weigh_a_byte_per_parameter():
    qwen = load_config(CONFIGS / "qwen3-coder-480b-a35b-fp8.json")
    llama = load_config(CONFIGS / "llama-3.1-70b.json")
    assert qwen.weight_gb == pytest.approx(qwen.params_b, rel=1e-6)
    assert llama.weight_gb == pytest.approx(2 * llama.params_b, rel=1e-6)


@pytest.mark.parametrize("name, bf16, fp8", [
    ("llama-3.1-70b", 327_680, 163_840), ("qwen3-coder-480b-a35b-fp8", 253_952, 126_976),
    ("deepseek-v3", 70_272, 35_136)])
def test_kv_bytes_per_token_as_planning_facts(name, bf16, fp8):
    shape = load_config(CONFIGS / f"{name}.json")
    assert kv_layout(shape, "auto").per_gpu_bytes == kv_layout(shape, "auto").stored_bytes == bf16
    assert kv_layout(shape, "fp8").per_gpu_bytes == fp8


def test_tensor_parallel_splits_heads_but_not_the_mla_latent():
    llama = load_config(CONFIGS / "llama-3.1-70b.json")
    deepseek = load_config(CONFIGS / "deepseek-v3.json")
    at8 = kv_layout(llama, "auto", 8)
    assert (at8.per_gpu_bytes, at8.stored_bytes, at8.instance_bytes) == (40_960, 327_680, 327_680)
    mla = kv_layout(deepseek, "auto", 8)
    assert mla.per_gpu_bytes == mla.stored_bytes == 70_272 and mla.instance_bytes == 8 * 70_272
    assert kv_layout(deepseek, "fp8_ds_mla").per_gpu_bytes == 61 * 656


def test_kv_heads_replicate_past_tp_and_layers_split_over_pp():
    qwen = load_config(CONFIGS / "qwen2.5-7b.json")          # 4 KV heads
    assert kv_layout(qwen, "auto", 8).heads_per_rank == 1
    assert kv_layout(qwen, "auto", 8).instance_bytes == 2 * kv_layout(qwen, "auto", 1).stored_bytes
    assert kv_layout(qwen, "auto", 1, 4).layers_per_rank == 7


def test_bad_configs_name_the_file_and_key(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000}))
    with pytest.raises(BadInput, match=r"config.json: key 'num_attention_heads' is missing"):
        load_config(tmp_path)                                  # a folder: its config.json
    path.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": -1, "num_attention_heads": 32,
                                "vocab_size": 1, "intermediate_size": 1}))
    with pytest.raises(BadInput, match="num_hidden_layers is -1; it must be a positive integer"):
        load_config(path)
    path.write_text("{not json")
    with pytest.raises(BadInput, match="not a readable JSON file"):
        load_config(path)
    with pytest.raises(BadInput, match="no such file"):
        load_config(tmp_path / "absent.json")


def test_bad_kv_dtypes_say_what_is_allowed():
    llama = load_config(CONFIGS / "llama-3.1-70b.json")
    with pytest.raises(BadInput, match="not a vLLM KV cache dtype") as raised:
        kv_layout(llama, "int3")
    assert "fp8" in raised.value.hint
    with pytest.raises(BadInput, match="for MLA models"):
        kv_layout(llama, "fp8_ds_mla")


def test_multimodal_configs_read_their_text_config():
    raw = json.loads((CONFIGS / "llama-2-7b.json").read_text())
    wrapped = {"model_type": "llava", "text_config": raw}
    assert parse_config(wrapped).layers == 32
