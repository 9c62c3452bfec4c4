"""Emulator profiles: one YAML file per platform, every cost-model parameter with its source.

A parameter is written either as a plain value (structural settings) or as `{value: X, source: "..."}`;
the cost-model sections require the second form, so nobody can add a number without saying where it came
from. Loading validates every key and value and names the file, the key and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fxctl.errors import BadInput
from fxctl.shipped import profile_path, shipped_dir

PROFILE_DIR = shipped_dir("profiles")   # the shipped profiles (package data; see fxctl.shipped)

# section -> key -> (type, must carry a source, allowed values or None)
NUM = (int, float)
SCHEMA: dict[str, dict[str, tuple[Any, bool, Any]]] = {
    "model": {
        "name": (str, False, None),
        "weight_bytes_gb": (NUM, True, None),
        "active_params_b": (NUM, True, None),
        "layers": (int, True, None),
        "attention_heads": (int, True, None),
        "kv_heads": (int, True, None),
        "head_dim": (int, True, None),
        "kv_dtype_bytes": (NUM, True, None),
        "experts": (int, True, None),
        "experts_per_token": (int, True, None),
        "expert_weight_share": (NUM, True, None),
        "max_model_len": (int, False, None),
    },
    "gpu": {
        "name": (str, False, None),
        "count": (int, False, None),
        "hbm_gb": (NUM, True, None),
        "hbm_bandwidth_gbs": (NUM, True, None),
        "peak_tflops": (NUM, True, None),
    },
    "serving": {
        "tensor_parallel": (int, False, None),
        "instances": (int, False, None),
        "gpu_memory_utilization": (NUM, False, None),
        "activation_reserve_gb": (NUM, True, None),
        "block_size": (int, False, None),
        "max_num_seqs": (int, False, None),
        "max_num_batched_tokens": (int, False, None),
        "offload": (bool, False, None),
        "num_gpu_blocks": (int, False, None),
        # real serving (fxctl serve --engine vllm): the host's device kind (default: from gpu.name) and,
        # on a CPU host, vLLM's KV cache in host memory (VLLM_CPU_KVCACHE_SPACE, GiB)
        "device": (str, False, ("cuda", "rocm", "ascend", "cpu")),
        "cpu_kv_cache_gb": (NUM, False, None),
    },
    "efficiency": {
        "prefill_mfu": (NUM, True, None),
        "hbm_bandwidth_efficiency": (NUM, True, None),
        "step_overhead_ms": (NUM, True, None),
    },
    "tiers": {
        "chunk_tokens": (int, False, None),
        "l1_size_gb": (NUM, True, None),
        "l1_bandwidth_gbs": (NUM, True, None),
        "l2_size_gb": (NUM, True, None),
        "l2_ssd_count": (int, True, None),
        "l2_ssd_read_gbs": (NUM, True, None),
        "l2_link_gbits": (NUM, True, None),
        "l2_link_efficiency": (NUM, True, None),
        "l2_read_efficiency": (NUM, True, None),
        "l2_request_read_gbs": (NUM, True, None),
        "l2_backend": (str, False, ("fxctl", "lmcache-disk")),
        "stock_l2_read_efficiency": (NUM, True, None),
        "stock_l2_link_efficiency": (NUM, True, None),
    },
    "fixed_delays": {
        "ttft_ms": (NUM, False, None),
        "tpot_ms": (NUM, False, None),
    },
}
TOP_LEVEL = {"name": str, "description": str, "emulator": str, "cost_model": str, "calibration": dict}
COST_MODELS = ("roofline", "fixed")
OPTIONAL_SECTIONS = {"fixed_delays", "calibration"}


@dataclass
class Param:
    value: Any
    source: str = ""


@dataclass
class Profile:
    """A validated profile: sections of parameters, each parameter a value with its source."""

    name: str
    path: Path
    description: str
    cost_model: str
    sections: dict[str, dict[str, Param]]
    calibration: dict[str, Any] = field(default_factory=dict)

    def get(self, section: str, key: str, default: Any = None) -> Any:
        param = self.sections.get(section, {}).get(key)
        return default if param is None else param.value

    def with_overrides(self, **overrides: Any) -> Profile:
        """A copy with `section__key=value` replaced (used for --no-offload and the calibration's cases)."""
        sections = {name: dict(params) for name, params in self.sections.items()}
        for dotted, value in overrides.items():
            section, key = dotted.split("__", 1)
            old = sections.setdefault(section, {}).get(key, Param(value))
            sections[section][key] = Param(value, old.source)
        return Profile(self.name, self.path, self.description, self.cost_model, sections, self.calibration)

    def sources(self) -> list[tuple[str, Any, str]]:
        return [(f"{s}.{k}", p.value, p.source) for s, params in self.sections.items()
                for k, p in params.items() if p.source]


def resolve_profile_path(name_or_path: str) -> Path:
    """A path as given, or a shipped profile's name (with or without .yaml): fxctl.shipped.profile_path."""
    return profile_path(name_or_path)


def load_profile(name_or_path: str) -> Profile:
    path = resolve_profile_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: not valid YAML: {exc}", "fix the syntax") from exc
    return parse_profile(raw, path)


def parse_profile(raw: Any, path: Path) -> Profile:
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: a profile is a mapping of sections", "see profiles/lab.yaml")
    problems: list[str] = []
    for key, value in raw.items():
        if key not in TOP_LEVEL and key not in SCHEMA:
            allowed = ", ".join(sorted(set(TOP_LEVEL) | set(SCHEMA)))
            problems.append(f"unknown key '{key}' (allowed: {allowed})")
        elif key in TOP_LEVEL and not isinstance(value, TOP_LEVEL[key]):
            problems.append(f"'{key}' must be a {TOP_LEVEL[key].__name__}")
    cost_model = raw.get("cost_model", "roofline")
    if cost_model not in COST_MODELS:
        problems.append(f"'cost_model' is '{cost_model}' (allowed: {', '.join(COST_MODELS)})")
    required = {"fixed_delays"} if cost_model == "fixed" else set(SCHEMA) - OPTIONAL_SECTIONS
    sections: dict[str, dict[str, Param]] = {}
    for section, schema in SCHEMA.items():
        body = raw.get(section)
        if body is None:
            if section in required:
                problems.append(f"missing section '{section}'")
            continue
        if not isinstance(body, dict):
            problems.append(f"'{section}' must be a mapping")
            continue
        sections[section] = parse_section(section, body, schema, problems,
                                          need_all=section in required)
    if problems:
        raise BadInput(f"{path}: " + "; ".join(problems),
                       "every cost-model value is {value: X, source: '...'}; see profiles/lab.yaml")
    name = raw.get("name", path.stem)
    return Profile(name, path, raw.get("description", ""), cost_model, sections, raw.get("calibration", {}))


def parse_section(section: str, body: dict, schema: dict, problems: list[str], *, need_all: bool) -> dict:
    params: dict[str, Param] = {}
    for key, entry in body.items():
        if key not in schema:
            problems.append(f"unknown key '{section}.{key}' (allowed: {', '.join(schema)})")
            continue
        kind, needs_source, allowed = schema[key]
        value, source = (entry.get("value"), entry.get("source", "")) if isinstance(entry, dict) else (entry, "")
        if needs_source and not source:
            problems.append(f"'{section}.{key}' needs a source: write {{value: ..., source: '...'}}")
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            problems.append(f"'{section}.{key}' is {value!r}: must be {type_name(kind)}")
            continue
        if allowed and value not in allowed:
            problems.append(f"'{section}.{key}' is {value!r} (allowed: {', '.join(allowed)})")
        elif isinstance(value, NUM) and not isinstance(value, bool) and value < 0:
            problems.append(f"'{section}.{key}' is {value}: must not be negative")
        params[key] = Param(value, source)
    if need_all:
        for key, (_, needs_source, _) in schema.items():
            if needs_source and key not in params and not any(key in p for p in problems):
                problems.append(f"missing key '{section}.{key}'")
    return params


def type_name(kind: Any) -> str:
    if kind is NUM:
        return "a number"
    return {int: "an integer", str: "a string", bool: "true or false"}.get(kind, str(kind))
