"""Serving metrics from per-request records, with vLLM bench's conventions and result field names.

TTFT: request start to the first streamed token. TPOT: (E2EL - TTFT) / (output tokens - 1). ITL: per
token (a chunk carrying k tokens counts k gaps of gap/k). Throughputs over the run's duration. Goodput:
requests/s meeting every per-request SLO. Percentiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

PERCENTILES = (50, 90, 99)


@dataclass
class RequestRecord:
    """One request as the client saw it; times in seconds (already divided by the time scale)."""

    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float | None = None
    e2el: float | None = None
    itl: list[float] = field(default_factory=list)
    error: str = ""
    model_ttft: float | None = None   # the emulator's own figure (model time), when the server reports it
    model_e2el: float | None = None
    client: int = -1                  # closed loop: which client sent it
    queued: float = 0.0               # open loop with a cap: time waiting for a free slot before sending
    index: int = -1                   # which prompt (completion workloads)
    token_logprobs: list[float] | None = None   # when the workload asks for logprobs
    text: str | None = None                      # the output text, kept with the logprobs (to compare outputs)

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2el is None or self.output_tokens < 2:
            return None
        return (self.e2el - self.ttft) / (self.output_tokens - 1)


def percentile(values: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy.percentile's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def per_token_gaps(chunk_times: list[float], output_tokens: int) -> list[float]:
    """ITL per token from chunk arrival times: each gap spread over the tokens its chunk carried."""
    gaps = [b - a for a, b in zip(chunk_times, chunk_times[1:])]
    if not gaps:
        return []
    if output_tokens <= len(chunk_times):
        return gaps
    per_chunk = (output_tokens - 1) / len(gaps)     # tokens after the first, spread evenly over chunks
    whole = max(int(round(per_chunk)), 1)
    return [g / whole for g in gaps for _ in range(whole)]


def distribution(name: str, values_s: list[float]) -> dict[str, float]:
    """mean/median/std/p50/p90/p99 of a latency in ms, with vLLM bench's key names."""
    ms = [v * 1000 for v in values_s]
    out = {f"mean_{name}_ms": statistics.fmean(ms) if ms else 0.0,
           f"median_{name}_ms": percentile(ms, 50),
           f"std_{name}_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0}
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = percentile(ms, p)
    return out


@dataclass(frozen=True)
class Limit:
    """One SLO term, e.g. ttft_p50 <= 12 s: a metric, a statistic and a bound in seconds."""

    metric: str        # ttft, tpot, itl, e2el
    stat: str          # p50, p90, p99, mean, median
    bound_s: float

    @property
    def key(self) -> str:
        stat = "median" if self.stat == "p50" else self.stat
        return f"{stat}_{self.metric}_ms"

    def margin(self, result: dict) -> float:
        """(bound - value) / bound: >= 0 means met."""
        value_s = result[self.key] / 1000
        return (self.bound_s - value_s) / self.bound_s

    def __str__(self) -> str:
        return f"{self.metric}_{self.stat}<={self.bound_s:g}s"


SLO_TERM = re.compile(r"^\s*(ttft|tpot|itl|e2el)_(p50|p90|p99|mean|median)\s*<=\s*([0-9.]+)\s*(ms|s)?\s*$")


def parse_slo(text: str) -> list[Limit]:
    """'ttft_p50<=12s,tpot_p99<=200ms' -> limits; ValueError naming the bad term."""
    limits = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        match = SLO_TERM.match(term)
        if not match:
            raise ValueError(f"bad SLO term {term!r}: write METRIC_STAT<=VALUE[s|ms], METRIC in ttft, tpot, "
                             f"itl, e2el, STAT in p50, p90, p99, mean (e.g. ttft_p50<=12s)")
        metric, stat, value, unit = match.groups()
        limits.append(Limit(metric, stat, float(value) / (1000 if unit == "ms" else 1)))
    if not limits:
        raise ValueError("empty SLO")
    return limits


def meets_request_slo(record: RequestRecord, limits: list[Limit]) -> bool:
    """Goodput counts a request when its own TTFT/TPOT/E2EL meet every bound (as vLLM's --goodput)."""
    for limit in limits:
        value = {"ttft": record.ttft, "tpot": record.tpot, "e2el": record.e2el,
                 "itl": max(record.itl) if record.itl else None}[limit.metric]
        if value is not None and value > limit.bound_s:
            return False
    return True


def on_model_clock(record: RequestRecord) -> RequestRecord:
    """The record with the emulator's model-time TTFT and E2EL (ITL stays client-measured)."""
    if not record.ok or record.model_ttft is None or record.model_e2el is None:
        return record
    return RequestRecord(True, record.prompt_tokens, record.output_tokens, record.model_ttft, record.model_e2el,
                         record.itl, record.error, record.model_ttft, record.model_e2el, record.client,
                         record.queued)


def impossible_latency(record: RequestRecord) -> bool:
    """A latency below zero or not finite: a broken clock (the emulator's model time once went negative)."""
    return any(v is not None and not (math.isfinite(v) and v >= 0) for v in (record.ttft, record.e2el, *record.itl))


def summarize(records: list[RequestRecord], duration_s: float, limits: list[Limit] | None = None) -> dict:
    """The run's result with vLLM bench field names (plus p50/p90, goodput and errors)."""
    done = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    output_tokens = sum(r.output_tokens for r in done)
    input_tokens = sum(r.prompt_tokens for r in done)
    result = {
        "completed": len(done), "failed": len(failed), "duration": duration_s,
        "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "request_throughput": len(done) / duration_s if duration_s > 0 else 0.0,
        "output_throughput": output_tokens / duration_s if duration_s > 0 else 0.0,
        "total_token_throughput": (input_tokens + output_tokens) / duration_s if duration_s > 0 else 0.0,
    }
    result |= distribution("ttft", [r.ttft for r in done if r.ttft is not None])
    result |= distribution("tpot", [r.tpot for r in done if r.tpot is not None])
    result |= distribution("itl", [g for r in done for g in r.itl])
    result |= distribution("e2el", [r.e2el for r in done if r.e2el is not None])
    if limits:
        good = sum(1 for r in done if meets_request_slo(r, limits))
        result["request_goodput"] = good / duration_s if duration_s > 0 else 0.0
    result["mean_client_queue_ms"] = statistics.fmean([r.queued * 1000 for r in done]) if done else 0.0
    result["invalid_latencies"] = sum(1 for r in done if impossible_latency(r))
    errors: dict[str, int] = {}
    for r in failed:
        errors[r.error[:120]] = errors.get(r.error[:120], 0) + 1
    result["errors"] = errors
    model = [r for r in done if r.model_ttft is not None]
    if model:  # the emulator's model-time view of the same requests, to compare with the client's
        result["model_median_ttft_ms"] = percentile([r.model_ttft * 1000 for r in model], 50)
        result["model_median_e2el_ms"] = percentile([r.model_e2el * 1000 for r in model if r.model_e2el], 50)
    return result


def failed_too_many(result: dict, max_fraction: float | None = None) -> str:
    """Why a load run counts as failed ("" if it does not): no request ran, or more than max_fraction of them
    failed; by default (None) only a run in which every request failed."""
    done, failed = result["completed"], result["failed"]
    total = done + failed
    if total == 0:
        return "no request ran"
    if (done == 0) if max_fraction is None else failed / total > max_fraction:
        first = next(iter(result.get("errors") or {}), "")
        return f"{failed} of {total} requests failed" + (f" (first error: {first})" if first else "")
    return ""
