"""Emulator profiles: one YAML file per platform, every cost-model parameter with its source.

A parameter is written either as a plain value (structural settings) or as `{value: X, source: "..."}`;
the cost-model sections require the second form, so nobody can add a number without saying where it came
from. Loading validates every key and value and names the file, the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from fxctl.errors import BadInput
from fxctl.inventory.fields import Str, one_of, refuse, shape
from fxctl.inventory.problems import problems_of
from fxctl.inventory.source import Document, SyntaxProblem, load_yaml_file
from fxctl.kvtier.admission import ADMISSION_POLICIES
from fxctl.serve.router_settings import POLICIES as ROUTER_POLICIES
from fxctl.shipped import profile_path, shipped_dir

PROFILE_DIR = shipped_dir("profiles")   # the shipped profiles (package data; see fxctl.shipped)

NUM = (int, float)
_KINDS = {NUM: "a number", int: "an integer", str: "a string", bool: "true or false"}


@dataclass
class Param:
    value: Any
    source: str = ""


class _NeedsSource:
    """Marks a cost-model parameter: written {value: X, source: '...'} and required in a used section."""


NEEDS_SOURCE = _NeedsSource()


def param(kind: Any, *, source: bool = False, choices: tuple = ()) -> Any:
    """A parameter: a plain value, or {value: X, source: '...'} (the only form when `source`), read as Param."""
    def check(entry: Any) -> Param:
        value, where = entry, ""
        if isinstance(entry, dict):
            if extra := sorted(set(entry) - {"value", "source"}, key=str):
                raise refuse(f"unknown key {extra[0]!r}; a parameter is {{value: X, source: '...'}}")
            value, where = entry.get("value"), entry.get("source") or ""
            if not isinstance(where, str):
                raise refuse("source must be a string")
        if source and not where:
            raise refuse("needs a source: write {value: ..., source: '...'}")
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise refuse(f"{value!r} must be {_KINDS[kind]}")
        if choices and value not in choices:
            raise refuse(f"{value!r} is not allowed; one of: {', '.join(choices)}")
        if kind in (int, NUM) and value < 0:
            raise refuse(f"{value} must not be negative")
        return Param(value, where)
    return Annotated[Any, AfterValidator(check), *((NEEDS_SOURCE,) if source else ())]


def cost(kind: Any = NUM) -> Any:
    return param(kind, source=True)


@shape
class ModelSection:
    name: param(str) = None
    weight_bytes_gb: cost() = None
    active_params_b: cost() = None
    layers: cost(int) = None
    attention_heads: cost(int) = None
    kv_heads: cost(int) = None
    head_dim: cost(int) = None
    kv_dtype_bytes: cost() = None
    experts: cost(int) = None
    experts_per_token: cost(int) = None
    expert_weight_share: cost() = None
    max_model_len: param(int) = None
    kv_latent_dim: param(int) = None   # MLA (DeepSeek): kv_lora_rank + qk_rope_head_dim; one latent per layer,
                                       # kept whole on every TP rank (fxctl.plan.kv); kv_heads/head_dim unused


@shape
class GpuSection:
    name: param(str) = None
    count: param(int) = None
    hbm_gb: cost() = None
    hbm_bandwidth_gbs: cost() = None
    peak_tflops: cost() = None


@shape
class RouterSection:
    """serving.router: the router in front of the replicas (`fxctl serve`; read as serving.router.policy)."""

    policy: param(str, choices=ROUTER_POLICIES) = None


@shape
class ServingSection:
    tensor_parallel: param(int) = None
    pipeline_parallel: param(int) = None   # > 1: one model across that many hosts over Ray (fxctl.serve.ray_cluster)
    instances: param(int) = None
    gpu_memory_utilization: param(NUM) = None
    activation_reserve_gb: cost() = None
    block_size: param(int) = None
    max_num_seqs: param(int) = None
    max_num_batched_tokens: param(int) = None
    offload: param(bool) = None
    num_gpu_blocks: param(int) = None
    # real serving (fxctl serve --engine vllm): the host's device kind (default: from gpu.name) and,
    # on a CPU host, vLLM's KV cache in host memory (VLLM_CPU_KVCACHE_SPACE, GiB)
    device: param(str, choices=("cuda", "rocm", "ascend", "cpu")) = None
    cpu_kv_cache_gb: param(NUM) = None
    kv_cache_dtype: param(str) = None      # vLLM's --kv-cache-dtype (fxctl.serve.vllm_flags); the model's
                                           # kv_dtype_bytes is what the cost model uses
    enforce_eager: param(bool) = None      # vLLM's --enforce-eager (no torch.compile); the emulator ignores it
    router: RouterSection | None = None


@shape
class EfficiencySection:
    prefill_mfu: cost() = None
    hbm_bandwidth_efficiency: cost() = None
    step_overhead_ms: cost() = None


@shape
class TiersSection:
    chunk_tokens: param(int) = None
    l1_size_gb: cost() = None
    l1_bandwidth_gbs: cost() = None
    l2_size_gb: cost() = None
    l2_ssd_count: cost(int) = None
    l2_ssd_read_gbs: cost() = None
    l2_link_gbits: cost() = None
    l2_links: param(int) = None        # NVMe-oF links used together (multipath); the link rate is per link
    l2_link_efficiency: cost() = None
    l2_read_efficiency: cost() = None
    l2_request_read_gbs: cost() = None
    l2_backend: param(str, choices=("fxctl", "lmcache-disk")) = None
    l2_admission: param(str, choices=ADMISSION_POLICIES) = None  # which chunks fxctl's L2 writes (kvtier/admission.py)
    stock_l2_read_efficiency: cost() = None
    stock_l2_link_efficiency: cost() = None


@shape
class FixedDelaysSection:
    ttft_ms: param(NUM) = None
    tpot_ms: param(NUM) = None


@shape
class ProfileFile:
    """A profile as written: the roofline cost model needs every section but fixed_delays, and in each
    every sourced parameter; the fixed one needs only fixed_delays."""

    name: Str | None = None              # the file's stem when not given
    description: Str = ""
    emulator: Str | None = None
    cost_model: one_of("roofline", "fixed") = "roofline"
    calibration: dict[Str, Any] = Field(default_factory=dict)
    model: ModelSection | None = None
    gpu: GpuSection | None = None
    serving: ServingSection | None = None
    efficiency: EfficiencySection | None = None
    tiers: TiersSection | None = None
    fixed_delays: FixedDelaysSection | None = None


SECTIONS = ("model", "gpu", "serving", "efficiency", "tiers", "fixed_delays")


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
        doc = load_yaml_file(path)
    except SyntaxProblem as exc:
        raise BadInput(str(exc.problem), "fix the syntax") from None
    return parse_profile(doc.data, path, doc)


def parse_profile(raw: Any, path: Path, doc: Document | None = None) -> Profile:
    """The validated profile; BadInput naming every problem with file:line: key (line 1 without `doc`)."""
    doc = doc or Document(file=str(path), data=raw)
    problems = [doc.problem(where, f"duplicate key (also on an earlier line); line {line} wins")
                for where, line in doc.duplicates]
    try:
        book = TypeAdapter(ProfileFile).validate_python(raw)
    except ValidationError as exc:
        book, problems = None, problems + problems_of(exc, doc, ProfileFile)
    if book is not None:
        problems += missing_parts(book, doc)
    if problems:
        problems.sort(key=lambda p: (p.line or 0, p.key))
        raise BadInput(f"{path}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems),
                       "every cost-model value is {value: X, source: '...'}; see profiles/lab.yaml")
    sections = {name: flat_params(section) for name in SECTIONS if (section := getattr(book, name)) is not None}
    return Profile(book.name or path.stem, path, book.description, book.cost_model, sections, book.calibration)


def flat_params(section: Any, prefix: str = "") -> dict[str, Param]:
    """A section's parameters by key; a nested section's as 'outer.key' (serving.router.policy is
    get("serving", "router.policy"))."""
    out: dict[str, Param] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if isinstance(value, Param):
            out[prefix + f.name] = value
        elif dataclasses.is_dataclass(value):
            out.update(flat_params(value, f"{prefix}{f.name}."))
    return out


def missing_parts(book: ProfileFile, doc: Document) -> list:
    """The sections the cost model needs, and in each the sourced parameters, that the file lacks."""
    needed = ("fixed_delays",) if book.cost_model == "fixed" else tuple(s for s in SECTIONS if s != "fixed_delays")
    problems = []
    for name in needed:
        section = getattr(book, name)
        if section is None:
            problems.append(doc.problem((), f"missing required key '{name}'"))
            continue
        hints = typing.get_type_hints(type(section), include_extras=True)
        problems += [doc.problem((name,), f"missing required key '{f.name}'") for f in dataclasses.fields(section)
                     if getattr(section, f.name) is None and NEEDS_SOURCE in getattr(hints[f.name], "__metadata__", ())]
    return problems
