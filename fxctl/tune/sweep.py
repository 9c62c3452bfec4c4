"""`fxctl tune`: server settings in the outer loop, a concurrency search inside, every trial on disk.

For each configuration of server settings, a search generator proposes concurrencies and receives each
trial's observation (`search.send(obs)`); the driver restarts the server only when settings change (and
only when a trial must actually be measured, so a finished run resumes without starting anything).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from fxctl.errors import BadInput
from fxctl.loadgen.metrics import Limit, RequestRecord, parse_slo
from fxctl.loadgen.workloads import WorkloadSpec
from fxctl.tune.drivers import SimDriver, TrialLoad, UrlDriver, VirtualDriver
from fxctl.tune.options import TARGETS, TuneOptions
from fxctl.tune.profiles import parse_params, settings_key
from fxctl.tune.search import (
    Observation,
    bracket_then_bisect,
    drive,
    estimate_trials,
    full_grid,
    with_repeats,
)
from fxctl.tune.store import RunStore


def workload_of(options: TuneOptions, profile_path: Path | None) -> WorkloadSpec:
    """Prompt shape: the options, else the profile's calibration workload, else 4K tokens."""
    cal = {}
    if profile_path is not None:
        from fxctl.sim.profile import load_profile
        cal = load_profile(str(profile_path)).calibration
    mean = int(cal.get("prompt_tokens", 4096))
    spread = float(cal.get("prompt_spread", 0.0))
    low = options.min_tokens or int(mean * (1 - spread))
    high = options.max_tokens or max(int(mean * (1 + spread)), low)
    return WorkloadSpec(options.workload, low, high, options.shared_prefix,
                        options.output_tokens or int(cal.get("output_tokens", 64)))


class TuneProgress(Protocol):
    """What a tuning run reports while it runs (the CLI draws it; the library prints nothing)."""

    def begin(self, label: str, total: int) -> None:
        """A trial starts; `total`: about how many trials the run takes."""

    def running(self, records: list[RequestRecord], elapsed: float) -> None:
        """Requests of the running trial finished so far."""

    def end(self, trial: dict) -> None:
        """A trial finished (or was found on disk: trial["resumed"])."""


class NoProgress:
    def begin(self, label: str, total: int) -> None:
        pass

    def running(self, records: list[RequestRecord], elapsed: float) -> None:
        pass

    def end(self, trial: dict) -> None:
        pass


def observe(trial: dict) -> Observation:
    return Observation(trial["concurrency"], trial["result"]["output_throughput"], trial["margin"])


def invalid_measurement(result: dict, limits: list[Limit]) -> str:
    """Why a result cannot be judged against the SLO ("" when it can): a negative or non-finite latency is a
    broken clock, not a fast server."""
    if result.get("invalid_latencies"):
        return f"{result['invalid_latencies']} request(s) with a negative or non-finite latency"
    for limit in limits:
        value = result.get(limit.key)
        if value is None or not math.isfinite(value) or value < 0:
            return f"{limit.metric}_{limit.stat} is {value} ms"
    return ""


def judge(result: dict, limits: list[Limit]) -> float:
    """The SLO margin (smallest over terms); a trial that lost requests, or whose latencies are impossible,
    cannot meet it."""
    if result["completed"] == 0 or invalid_measurement(result, limits):
        return -1.0
    margin = min(limit.margin(result) for limit in limits)
    return min(margin, -1e-9) if result["failed"] else margin


class Tuner:
    def __init__(self, options: TuneOptions, store: RunStore, progress: TuneProgress | None = None):
        self.options = options
        self.store = store
        self.limits = parse_slo(options.slo)
        self.profile_path = None
        if options.target in ("sim", "virtual", "vllm"):
            from fxctl.sim.profile import resolve_profile_path
            self.profile_path = resolve_profile_path(options.profile)
        self.load = TrialLoad(workload_of(options, self.profile_path), options.requests_per_client, self.limits,
                              options.time_limit_s, options.time_scale,
                              options.clock if options.target != "virtual" else "virtual")
        self.configs = parse_params(tuple(options.params))
        self.grid = tuple(sorted(set(options.concurrencies)))
        self.total = len(self.configs) * estimate_trials(self.grid, options.grid) + (1 if options.baseline else 0)
        self.progress = progress or NoProgress()
        self.trials: list[dict] = []
        self.measured = 0

    def driver(self):
        if self.options.target == "sim":
            return SimDriver(self.profile_path, self.store.dir)
        if self.options.target == "virtual":
            return VirtualDriver(self.profile_path)
        if self.options.target == "vllm":
            from fxctl.tune.vllm_driver import VllmDriver, VllmDriverSpec
            if not (self.options.python and self.options.model and self.options.l2_dir):
                raise BadInput("--target vllm needs the serving env's python, a model and an L2 directory",
                               "fxctl serve install-env and make-model give the defaults")
            return VllmDriver(VllmDriverSpec(self.options.profile, self.options.python, self.options.model,
                                             self.options.l2_dir))
        if not self.options.url:
            raise BadInput("--target url needs --url", "e.g. --url http://127.0.0.1:8000")
        return UrlDriver(self.options.url)

    def trial(self, driver, settings: dict, kind: str, concurrency: int, load: TrialLoad) -> dict:
        key = settings_key(settings)
        self.progress.begin(f"{key} {kind} c={concurrency}", self.total)
        found = self.store.load_trial(key, kind, concurrency)
        if found is not None:
            found["resumed"] = True
            self.trials.append(found)
            self.progress.end(found)
            return found
        started = time.perf_counter()
        result = driver.measure(settings, concurrency, load, self.progress.running)
        trial = {"settings": settings, "settings_key": key, "kind": kind, "concurrency": concurrency,
                 "result": result, "margin": judge(result, self.limits), "slo": self.options.slo,
                 "wall_s": time.perf_counter() - started, "target": self.options.target}
        trial["invalid"] = invalid_measurement(result, self.limits)
        trial["feasible"] = trial["margin"] >= 0
        self.store.save_trial(trial)
        self.measured += 1
        self.trials.append(trial)
        self.progress.end(trial)
        return trial

    def run(self) -> dict:
        driver = self.driver()
        searches = []
        try:
            for settings in self.configs:
                grid = self.grid
                search = full_grid(grid) if self.options.grid else bracket_then_bisect(grid, self.options.start)
                if self.options.repeats > 1:
                    search = with_repeats(search, self.options.repeat_within, self.options.repeats)
                runs: Counter[int] = Counter()

                def measure(c: int, s=settings, runs=runs) -> Observation:
                    runs[c] += 1
                    kind = "search" if runs[c] == 1 else f"search-r{runs[c]}"
                    return observe(self.trial(driver, s, kind, c, self.load))

                chosen, seen = drive(search, measure)
                searches.append({"settings": settings, "settings_key": settings_key(settings),
                                 "chosen": asdict(chosen) if chosen else None, "trials": len(seen)})
            best = max((s for s in searches if s["chosen"]), key=lambda s: s["chosen"]["throughput"], default=None)
            baseline = None
            if best and self.options.baseline == "no-offload":
                baseline = self.trial(driver, {**best["settings"], "serving.offload": False}, "baseline",
                                      best["chosen"]["concurrency"], self.baseline_load())
        finally:
            driver.close()
        return {"searches": searches, "best": best, "baseline": baseline}

    def baseline_load(self) -> TrialLoad:
        """No offload: the fill phase of cold recovery fills nothing (HBM's cache is reset before the replay),
        so the baseline replays the same prompt shape without it."""
        if self.options.target == "url":
            raise BadInput("--baseline no-offload needs a server fxctl starts (--target sim)", "drop --baseline")
        w = self.load.workload
        workload = WorkloadSpec("long-context", w.min_tokens, w.max_tokens, w.shared_prefix, w.output_tokens)
        return TrialLoad(workload, self.load.requests_per_client, self.limits, self.load.time_limit_s,
                         self.load.time_scale, self.load.clock)


def check_options(options: TuneOptions) -> None:
    if options.target not in TARGETS:
        raise BadInput(f"unknown target {options.target}", f"one of {', '.join(TARGETS)}")
    if options.baseline not in (None, "no-offload"):
        raise BadInput(f"unknown baseline {options.baseline}", "--baseline no-offload")
    if not options.concurrencies or min(options.concurrencies) < 1:
        raise BadInput("concurrency grid must hold positive integers", "e.g. --concurrency 1,2,4,8,16,32")
    parse_params(tuple(options.params))
    try:
        parse_slo(options.slo)
    except ValueError as exc:
        raise BadInput(str(exc), "e.g. --slo 'ttft_p50<=12s'") from exc
