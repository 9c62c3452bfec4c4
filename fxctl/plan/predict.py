"""The operating point in virtual time: the calibrated emulator (fxctl.sim) serving the planned workload.

Three cases, as R2 reads them: cold recovery (every context's KV loaded whole from L2: HBM prefix cache
and L1 reset after a fill), reuse (HBM reset only: L1 serves what it holds) and recompute (no offload).
SIMULATED GPU timing: model seconds from the profile's cost model, never a measurement.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import asdict, dataclass

from fxctl.plan.capacity import Ask
from fxctl.sim.calibrate import Workload, cold_recovery, no_offload
from fxctl.sim.connector import build_tiers
from fxctl.sim.engine import Engine
from fxctl.sim.profile import Profile
from fxctl.sim.virtual import RunSummary, distinct_prompts, run_closed_loop

CASES = ("cold", "reuse", "recompute")
TOKEN_BUDGET = 40_000_000  # prompt tokens one emulated case may hold in memory (~8 B each; about 8 s per case)
BOOKKEEPING_BLOCK = 256   # HBM blocks of one LMCache chunk in these runs, as the calibration (no figure moves)


@dataclass
class Prediction:
    case: str
    concurrency: int
    context: int
    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    output_tps: float
    requests: int
    l2_write_gbs: float      # cold case: the KV of as many new contexts, written behind, per model second
    preemptions: int

    def to_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def workload_for(profile: Profile, ask: Ask) -> Workload:
    spread = float(profile.calibration.get("prompt_spread", 0.25))
    limit = profile.get("model", "max_model_len") or 1 << 30
    while spread > 0 and ask.context * (1 + spread) + ask.output_tokens + 1 > limit:
        spread = round(spread - 0.05, 2)
    per_client = int(profile.calibration.get("requests_per_client", 4))
    per_client = max(1, min(per_client, TOKEN_BUDGET // (ask.concurrency * ask.context)))
    return Workload(ask.context, max(spread, 0.0), ask.output_tokens, (ask.concurrency,), per_client,
                    BOOKKEEPING_BLOCK)


def too_large(ask: Ask) -> str | None:
    """Why the emulator cannot serve this ask here (its prompts would not fit its token budget), or None."""
    tokens = ask.concurrency * ask.context
    if tokens <= TOKEN_BUDGET:
        return None
    return (f"{ask.concurrency} x {ask.context:,} tokens in flight ({tokens:,}) is more than the emulator holds "
            f"here ({TOKEN_BUDGET:,}); plan a smaller instance or lower --concurrency")


def predict(profile: Profile, ask: Ask, case: str, stored_bytes_per_token: float) -> Prediction:
    workload = workload_for(profile, ask)
    c = ask.concurrency
    prompts = distinct_prompts(c * workload.requests_per_client, workload.prompt_tokens, workload.prompt_spread,
                               seed=c)
    keys: dict = {}
    if case == "cold":
        summary, _ = cold_recovery(profile, workload, c, "fxctl", prompts, keys)
    elif case == "recompute":
        summary, _ = no_offload(profile, workload, c, prompts, keys)
    else:
        summary = reuse(profile, workload, prompts, keys)
    written = sum(len(p) for p in prompts) * stored_bytes_per_token
    return of(case, ask, summary, written)


def reuse(profile: Profile, workload: Workload, prompts: list[list[int]], keys: dict) -> RunSummary:
    engine = Engine(workload.engine_profile(profile), offload=True, tiers=build_tiers(profile, "fxctl"))
    c = workload.concurrency[0]
    run_closed_loop(engine, prompts, c, workload.output_tokens, "fill", keys)
    engine.reset_prefix_cache()
    return run_closed_loop(engine, prompts, c, workload.output_tokens, "reuse", keys)


def of(case: str, ask: Ask, s: RunSummary, written_bytes: float) -> Prediction:
    write = written_bytes / s.duration_s / 1e9 if case == "cold" and s.duration_s else 0.0
    return Prediction(case, ask.concurrency, ask.context, s.ttft_p50_s, s.ttft_p90_s, s.tpot_p50_s,
                      s.output_throughput, s.requests, write, s.preemptions)


def r2_check(profile: Profile) -> dict | None:
    """The tiered cold-recovery TTFT p50 at R2's own setting (c=16, the calibration prompts) beside R2's."""
    if profile.calibration.get("report") != "R2":
        return None
    workload = Workload.from_profile(profile)
    prompts = distinct_prompts(16 * workload.requests_per_client, workload.prompt_tokens, workload.prompt_spread,
                               seed=16)
    summary, _ = cold_recovery(profile, workload, 16, "fxctl", prompts, {})
    published = 11.85
    return {"setting": f"R2: c=16, {workload.prompt_tokens:,}-token prompts (+-{workload.prompt_spread:.0%}), "
                       f"{profile.get('tiers', 'l2_ssd_count')} SSDs, this profile's hardware",
            "predicted_ttft_p50_s": round(summary.ttft_p50_s, 3), "report_ttft_p50_s": published,
            "ratio": round(summary.ttft_p50_s / published, 3),
            "within_15pct": abs(summary.ttft_p50_s / published - 1) <= 0.15}


Candidate = tuple[int, int]   # (SSDs, links)


def hardware_search(ssds: int, links: int, array_per_ssd: float, per_link: float,
                    max_ssds: int = 64, max_links: int = 16) -> Generator[Candidate, float, Candidate | None]:
    """Candidate (SSDs, links), fed each candidate's margin to the SLO (>= 0: met); returns the first
    candidate that meets it, or None. Each step adds to the bottleneck (the array or the links), so the
    first point met is the least hardware on that path; it stops when more hardware stops helping."""
    best_margin, flat = -float("inf"), 0
    while ssds <= max_ssds and links <= max_links:
        margin = yield ssds, links
        if margin >= 0:
            return ssds, links
        flat = flat + 1 if margin <= best_margin + 0.005 else 0
        best_margin = max(best_margin, margin)
        if flat >= 2:
            return None
        if ssds * array_per_ssd <= links * per_link:
            ssds += 1
        else:
            links += 1
    return None
