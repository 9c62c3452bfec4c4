"""`fxctl plan` as a library function: the profile and the ask in, every figure of the plan out."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from fxctl.errors import BadInput
from fxctl.plan import capacity, predict
from fxctl.plan.capacity import Ask
from fxctl.plan.inputs import Change, with_changes
from fxctl.plan.kv import KvLayout, kv_layout
from fxctl.plan.shape import ModelShape, kv_dtype_of
from fxctl.sim.profile import Profile

SLO_TERM = re.compile(r"^\s*(ttft_p50|ttft_p90|tpot_p50)\s*<=\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$"
                      r"|^\s*(output_tps)\s*>=\s*([0-9]*\.?[0-9]+)\s*$")
SLO_HELP = "terms ttft_p50<=12s, ttft_p90<=20s, tpot_p50<=100ms, output_tps>=70, joined by commas"


@dataclass(frozen=True)
class Term:
    metric: str       # ttft_p50_s, ttft_p90_s, tpot_p50_s (upper bounds) or output_tps (lower bound)
    bound: float

    def margin(self, p: predict.Prediction) -> float:
        value = getattr(p, self.metric)
        if self.metric == "output_tps":
            return (value - self.bound) / self.bound if self.bound else 0.0
        return (self.bound - value) / self.bound if self.bound else -value

    def __str__(self) -> str:
        if self.metric == "output_tps":
            return f"output_tps>={self.bound:g}"
        return f"{self.metric[:-2]}<={self.bound:g}s"


def parse_slo(text: str | None) -> list[Term]:
    terms = []
    for part in filter(None, (t.strip() for t in (text or "").split(","))):
        match = SLO_TERM.match(part)
        if not match:
            raise BadInput(f"--slo: cannot read {part!r}", SLO_HELP)
        if match.group(4):
            terms.append(Term("output_tps", float(match.group(5))))
        else:
            scale = 1000 if match.group(3) == "ms" else 1
            terms.append(Term(f"{match.group(1)}_s", float(match.group(2)) / scale))
    return terms


def margin(terms: list[Term], p: predict.Prediction) -> float:
    return min((t.margin(p) for t in terms), default=0.0)


@dataclass
class Plan:
    profile: Profile
    shape: ModelShape
    kv: KvLayout
    ask: Ask
    slo: list[Term]
    hbm: capacity.Hbm
    tiers: capacity.Tiers
    bandwidth: capacity.Bandwidth
    predictions: list[predict.Prediction] = field(default_factory=list)
    recommended: dict | None = None          # SSDs and links that meet the SLO (cold recovery), if any
    r2: dict | None = None
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def meets(self) -> bool | None:
        cold = self.prediction("cold")
        return None if not self.slo or cold is None else margin(self.slo, cold) >= 0

    def prediction(self, case: str) -> predict.Prediction | None:
        return next((p for p in self.predictions if p.case == case), None)

    def to_dict(self) -> dict:
        return {"emulator": "predictions are SIMULATED GPU timing (fxctl sim, model seconds), not measurements",
                "profile": self.profile.name, "model": self.shape.name, "ask": asdict(self.ask),
                "slo": [str(t) for t in self.slo], "kv": self.kv.to_dict(),
                **capacity.as_dict(self.hbm, self.tiers, self.bandwidth),
                "predictions": [p.to_dict() for p in self.predictions], "meets_slo": self.meets,
                "recommended": self.recommended, "r2_check": self.r2, "notes": self.notes,
                "wall_s": round(self.wall_s, 2)}


def kv_of(profile: Profile, shape: ModelShape) -> KvLayout:
    return kv_layout(shape, kv_dtype_of(profile), int(profile.get("serving", "tensor_parallel", 1)),
                     int(profile.get("serving", "pipeline_parallel", 1) or 1))


def make_plan(profile: Profile, shape: ModelShape, ask: Ask, slo: list[Term], *, emulate: bool = True) -> Plan:
    started = time.perf_counter()
    if ask.context < 1 or ask.concurrency < 1:
        raise BadInput("--context and --concurrency must be at least 1", "e.g. --context 128k --concurrency 16")
    kv = kv_of(profile, shape)
    ttft = next((t.bound for t in slo if t.metric == "ttft_p50_s"), None)
    plan = Plan(profile, shape, kv, ask, slo, capacity.hbm(profile, kv, ask), capacity.tiers(profile, kv, ask),
                capacity.bandwidth(profile, kv, ask, ttft))
    if emulate:
        emulate_plan(plan)
    plan.wall_s = time.perf_counter() - started
    return plan


def sized(profile: Profile, plan: Plan) -> Profile:
    """The profile with the plan's tier sizes (what the emulator serves and --write-profile writes)."""
    a = plan.ask
    return with_changes(profile, [
        Change("tiers.l1_size_gb", round(plan.tiers.l1_gb, 1),
               f"fxctl plan: {plan.tiers.l1_contexts} contexts of {a.context:,} tokens (last {a.l1_rounds} rounds)"),
        Change("tiers.l2_size_gb", round(plan.tiers.l2_gb * 1.1, 1),
               f"fxctl plan: reuse window of {a.reuse_window} contexts of {a.context:,} tokens, +10 % headroom"),
        Change("serving.max_num_seqs", max(a.concurrency, 1), ""),
        Change("model.max_model_len", plan.hbm.max_model_len, "")])


def emulate_plan(plan: Plan) -> None:
    if plan.ask.context + plan.ask.output_tokens > plan.hbm.max_model_len:
        plan.notes.append("no prediction: one request of this context does not fit (see HBM above)")
        return
    if (why := predict.too_large(plan.ask)) is not None:
        plan.notes.append(f"no prediction: {why}")
        return
    profile = sized(plan.profile, plan)
    plan.profile = profile
    stored = plan.kv.stored_bytes
    for case in predict.CASES:
        plan.predictions.append(predict.predict(profile, plan.ask, case, stored))
    cold = plan.prediction("cold")
    if plan.slo and margin(plan.slo, cold) < 0:
        plan.recommended = search_hardware(plan)
    elif plan.slo:
        plan.recommended = {"ssds": profile.get("tiers", "l2_ssd_count"), "links": profile.get("tiers", "l2_links", 1),
                            "met_by": "the given hardware", "cold": cold.to_dict()}


def search_hardware(plan: Plan) -> dict | None:
    """The least SSDs and links (from the arithmetic's lower bound up, the bottleneck first) whose emulated
    cold recovery meets the SLO, whatever the given hardware has; met_by None when none up to the search's
    limits does."""
    p, b = plan.profile, plan.bandwidth
    search = predict.hardware_search(b.ssds_needed or 1, b.links_needed or 1, b.ssd_gbs, b.one_link_gbs)
    tried = []
    try:
        ssds, links = next(search)
        while True:
            trial = with_changes(p, [Change("tiers.l2_ssd_count", ssds, "fxctl plan: sized for the SLO"),
                                     Change("tiers.l2_links", links, "fxctl plan: sized for the SLO")])
            cold = predict.predict(trial, plan.ask, "cold", plan.kv.stored_bytes)
            tried.append({"ssds": ssds, "links": links, "ttft_p50_s": round(cold.ttft_p50_s, 3)})
            ssds, links = search.send(margin(plan.slo, cold))
    except StopIteration as done:
        found = done.value
    if found is None:
        steps = ", ".join(f"{t['ssds']} SSDs + {t['links']} links {t['ttft_p50_s']:.1f} s" for t in tried)
        plan.notes.append(f"no SSD and link count up to the search's limits meets the SLO in cold recovery "
                          f"(tried {len(tried)}: {steps})")
        return {"met_by": None, "tried": tried}
    return {"ssds": found[0], "links": found[1], "met_by": "emulated cold recovery", "tried": tried}
