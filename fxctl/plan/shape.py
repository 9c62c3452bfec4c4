"""A model's shape as capacity planning needs it, read from a Hugging Face config.json or a profile.

Only what decides memory and compute: layers, attention (MHA/GQA heads, or DeepSeek's MLA latent), the
MoE layout and the parameter count (weights, active parameters per token). The parser is pure: a dict in,
a ModelShape out, BadInput naming the file and the key when a needed key is missing or wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fxctl.errors import BadInput

MLA_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "fp8": 1}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    attention_heads: int
    kv_heads: int                 # MLA: 1 (the latent is one "head")
    head_dim: int                 # MLA: kv_lora_rank + qk_rope_head_dim (vLLM's head size)
    mla: bool
    model_dtype: str              # torch_dtype: what vLLM's --kv-cache-dtype auto stores
    params_b: float               # all parameters, billions (estimated from the shape)
    weight_gb: float              # the checkpoint's bytes (FP8 checkpoints: 1 byte per parameter)
    active_params_b: float        # per token (MoE: the routed experts' share)
    experts: int = 0
    experts_per_token: int = 0
    expert_weight_share: float = 0.0
    max_position: int = 0
    source: str = ""


def load_config(path: Path) -> ModelShape:
    """The shape of the model whose config.json is `path` (a file or a model folder)."""
    path = path / "config.json" if path.is_dir() else path
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file", "give a model's config.json (a local file; no download)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not a readable JSON file: {exc}", "give a Hugging Face config.json") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: a config.json is a JSON object", "give a Hugging Face config.json")
    return parse_config(raw, str(path))


def parse_config(raw: dict[str, Any], where: str = "config.json") -> ModelShape:
    cfg = dict(raw.get("text_config") or {}, **{k: v for k, v in raw.items() if k != "text_config"}) \
        if isinstance(raw.get("text_config"), dict) else raw
    get = _reader(cfg, where)
    hidden = get("hidden_size")
    layers = get("num_hidden_layers")
    heads = get("num_attention_heads")
    vocab = get("vocab_size")
    mla = cfg.get("model_type") in MLA_MODEL_TYPES and cfg.get("kv_lora_rank") is not None
    if mla:
        kv_lora, rope = get("kv_lora_rank"), get("qk_rope_head_dim")
        nope, v_dim = get("qk_nope_head_dim"), get("v_head_dim")
        q_lora = cfg.get("q_lora_rank")
        q = hidden * heads * (nope + rope) if not q_lora else hidden * q_lora + q_lora * heads * (nope + rope)
        attention = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
        kv_heads, head_dim = 1, kv_lora + rope
    else:
        kv_heads = get("num_key_value_heads", default=heads)
        head_dim = get("head_dim", default=None) or hidden // heads
        attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    dense_ff, expert_ff, experts, per_token, shared_ff, moe_layers = _mlp(cfg, get, layers)
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    expert_params = moe_layers * experts * 3 * hidden * expert_ff
    total = embed + layers * attention + (layers - moe_layers) * 3 * hidden * dense_ff \
        + moe_layers * 3 * hidden * shared_ff + expert_params
    active = total - expert_params + (moe_layers * per_token * 3 * hidden * expert_ff if experts else 0)
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    quant = cfg.get("quantization_config") or {}
    fp8 = isinstance(quant, dict) and "fp8" in str(quant.get("quant_method", "")).lower()
    return ModelShape(
        name=str(cfg.get("_name_or_path") or (Path(where).parent if Path(where).name == "config.json"
                                              else Path(where).stem)),
        layers=layers, attention_heads=heads, kv_heads=kv_heads, head_dim=head_dim, mla=mla,
        model_dtype=dtype, params_b=total / 1e9, weight_gb=total * (1 if fp8 else DTYPE_BYTES.get(dtype, 2)) / 1e9,
        active_params_b=active / 1e9, experts=experts, experts_per_token=per_token,
        expert_weight_share=expert_params / total if total else 0.0,
        max_position=int(cfg.get("max_position_embeddings") or 0), source=where)


def _mlp(cfg: dict, get, layers: int) -> tuple[int, int, int, int, int, int]:
    """(dense FFN width, expert FFN width, experts, experts per token, shared-expert width, MoE layers)."""
    experts = int(cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    dense_ff = int(cfg.get("intermediate_size") or 0)
    if not experts:
        return get("intermediate_size"), 0, 0, 0, 0, 0
    per_token = get("num_experts_per_tok")
    expert_ff = int(cfg.get("moe_intermediate_size") or dense_ff)
    shared_ff = int(cfg.get("n_shared_experts") or 0) * expert_ff + int(cfg.get("shared_expert_intermediate_size") or 0)
    dense_layers = int(cfg.get("first_k_dense_replace") or 0) + len(cfg.get("mlp_only_layers") or [])
    return dense_ff, expert_ff, experts, per_token, shared_ff, layers - dense_layers


def _reader(cfg: dict, where: str):
    missing = object()

    def get(key: str, default: Any = missing) -> Any:
        value = cfg.get(key)
        if value is None:
            if default is missing:
                raise BadInput(f"{where}: key {key!r} is missing", "give the model's own config.json (Hugging Face)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise BadInput(f"{where}: {key} is {value!r}; it must be a positive integer",
                           "give the model's own config.json (Hugging Face)")
        return value
    return get


KV_DTYPE_OF_BYTES = {1: "fp8", 2: "bfloat16", 4: "float32"}   # a profile's model.kv_dtype_bytes as vLLM's dtype


def kv_dtype_of(profile) -> str:
    """The --kv-cache-dtype a profile serves with: serving.kv_cache_dtype, else what model.kv_dtype_bytes says."""
    return profile.get("serving", "kv_cache_dtype") \
        or KV_DTYPE_OF_BYTES.get(profile.get("model", "kv_dtype_bytes"), "auto")


def from_profile(profile) -> ModelShape:
    """The shape a profile's model section describes (its sourced figures; MLA when kv_latent_dim is set)."""
    m = lambda key, default=0: profile.get("model", key, default)  # noqa: E731
    latent = m("kv_latent_dim")
    dtype_bytes = m("kv_dtype_bytes", 2)
    return ModelShape(
        name=m("name", profile.name), layers=m("layers"), attention_heads=m("attention_heads"),
        kv_heads=1 if latent else m("kv_heads"), head_dim=latent or m("head_dim"), mla=bool(latent),
        model_dtype={1: "fp8", 4: "float32"}.get(dtype_bytes, "bfloat16"),
        params_b=0.0,   # a profile gives the weights' bytes, not the parameter count
        weight_gb=m("weight_bytes_gb"), active_params_b=m("active_params_b"), experts=m("experts"),
        experts_per_token=m("experts_per_token"), expert_weight_share=m("expert_weight_share", 0.0),
        max_position=m("max_model_len"), source=str(profile.path))
