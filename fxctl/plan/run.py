"""The command's library side: a request (what was typed) -> the planned profile, shape and ask -> a plan,
a sweep, or a written profile."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fxctl.errors import BadInput
from fxctl.plan import inputs, predict
from fxctl.plan.capacity import Ask
from fxctl.plan.planner import Plan, Term, make_plan, parse_slo
from fxctl.plan.shape import ModelShape, from_profile, load_config
from fxctl.sim.profile import Profile, load_profile

DEFAULT_BASE = "mi308x-qwen3-coder-480b-tp8"   # the profile calibrated to R2: its efficiencies
REUSE_ROUNDS = 16    # default reuse window: the last 16 rounds of `concurrency` contexts come back from L2


@dataclass
class PlanRequest:
    profile_name: str | None
    model_config: Path | None
    kv_dtype: str | None
    context: int
    concurrency: int
    reuse_window: int | None = None
    l1_rounds: int = 4
    output_tokens: int = 64
    slo: str | None = None
    gpu_kind: str | None = None
    hardware: dict[str, Any] = field(default_factory=dict)
    host_dram_gb: float | None = None
    ssd_write_gbs: float | None = None


def resolve(request: PlanRequest) -> tuple[Profile, Profile, ModelShape, Ask, list[Term]]:
    """(base profile, planned profile, model shape, ask, SLO terms), every input validated."""
    if request.profile_name is None and request.model_config is None:
        raise BadInput("give --profile or --model-config", "e.g. --profile mi308x-qwen3-coder-480b-tp8")
    terms = parse_slo(request.slo)
    base = load_profile(request.profile_name or DEFAULT_BASE)
    if base.cost_model != "roofline":
        raise BadInput(f"profile {base.name} has no roofline cost model (cost_model: {base.cost_model})",
                       "plan from a platform profile, e.g. mi308x-qwen3-coder-480b-tp8 or h200-70b")
    changes = []
    shape = load_config(request.model_config) if request.model_config else from_profile(base)
    if request.model_config:
        changes += inputs.model_changes(shape)
    if request.gpu_kind:
        changes += inputs.gpu_changes(request.gpu_kind.lower())
    hardware = {k: v for k, v in request.hardware.items() if v is not None}
    changes += inputs.hardware_changes(hardware)
    profile = inputs.with_changes(base, changes)
    if request.model_config or hardware or request.gpu_kind:
        profile.calibration.pop("report", None)   # R2's figures belong to the base profile's own setting
    if request.kv_dtype:
        profile = inputs.with_changes(profile, inputs.kv_dtype_changes(request.kv_dtype, shape))
    inputs.check_layout(profile)
    if hardware.get("weights_gb") is not None:
        shape = replace(shape, weight_gb=hardware["weights_gb"])
    ask = Ask(request.context, request.concurrency, request.reuse_window or REUSE_ROUNDS * request.concurrency,
              request.l1_rounds, request.output_tokens, request.host_dram_gb, request.ssd_write_gbs)
    return base, profile, shape, ask, terms


def run_plan(request: PlanRequest) -> Plan:
    base, profile, shape, ask, terms = resolve(request)
    plan = make_plan(profile, shape, ask, terms)
    if plan.predictions:
        plan.r2 = predict.r2_check(base) if profile.calibration.get("report") == "R2" else None
    return plan


def run_sweep(request: PlanRequest, spec: str, plot: Path | None) -> dict:
    from fxctl.plan.sweep import parse_sweep, sweep

    _base, profile, shape, ask, terms = resolve(request)
    param, values = parse_sweep(spec)
    return sweep(profile, shape, ask, terms, param, values, plot or Path(f"fxctl-plan-{param}.png"))


def write_planned_profile(plan: Plan, path: Path) -> Path:
    from fxctl.plan.profile_file import write_profile

    return write_profile(plan, path)
