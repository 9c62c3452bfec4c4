"""The emulated serving engine: vLLM-style continuous batching over a modelled GPU, in model time.

`step()` schedules one batch (running requests first: decodes and prefill chunks under a token budget,
preempting the newest running request when HBM has no block left; then waiting requests, FCFS, each
looked up in the HBM prefix cache and then in L1/L2), charges the step's cost-model time and applies it.
Requests with KV in L1/L2 wait for their transfer (as vLLM's WAITING_FOR_REMOTE_KVS) while others run.
The same engine runs in virtual time (calibration, tests) and behind the HTTP server (scaled sleeps).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.sim.blocks import BlockPool
from fxctl.sim.connector import TierSet, build_tiers
from fxctl.sim.cost import FixedDelayModel, ScheduledWork, cost_model, hbm_kv_blocks
from fxctl.sim.profile import Profile
from fxctl.sim.request import FINISHED, LOADING, RUNNING, WAITING, SimRequest
from fxctl.sim.stats import EngineStats

UNBOUNDED_BUDGET = 1 << 40


class RequestRejected(ValueError):
    """A request the engine can never serve (too long for the model or for all of HBM)."""


@dataclass
class StepResult:
    duration: float
    emitted: list[SimRequest] = field(default_factory=list)
    finished: list[SimRequest] = field(default_factory=list)


class Engine:
    def __init__(self, profile: Profile, *, offload: bool | None = None, tiers: TierSet | None = None):
        self.profile = profile
        self.model = cost_model(profile)
        self.block_size = int(profile.get("serving", "block_size", 16))
        self.chunk_tokens = int(profile.get("tiers", "chunk_tokens", CHUNK_TOKENS))
        self.pool = BlockPool(hbm_kv_blocks(profile))
        self.max_num_seqs = int(profile.get("serving", "max_num_seqs", 256))
        fixed = isinstance(self.model, FixedDelayModel)
        self.token_budget = UNBOUNDED_BUDGET if fixed else int(profile.get("serving", "max_num_batched_tokens", 8192))
        self.max_model_len = int(profile.get("model", "max_model_len", 1 << 30))
        self.offload = bool(profile.get("serving", "offload", False)) if offload is None else offload
        self.tiers = tiers if tiers is not None else build_tiers(profile)
        self.now = 0.0
        self.waiting: deque[SimRequest] = deque()
        self.loading: dict[int, SimRequest] = {}
        self.running: list[SimRequest] = []
        self.stats = EngineStats()

    # ---- requests in and out -------------------------------------------------------------------
    def add_request(self, req: SimRequest) -> None:
        if req.prompt_len + req.max_tokens > self.max_model_len:
            raise RequestRejected(f"prompt ({req.prompt_len} tokens) plus max_tokens ({req.max_tokens}) "
                                  f"exceeds the model's context length {self.max_model_len}")
        if math.ceil((req.prompt_len + req.max_tokens) / self.block_size) > self.pool.num_blocks:
            raise RequestRejected(f"request needs more KV blocks than HBM holds ({self.pool.num_blocks})")
        if req.prompt_len == 0:
            raise RequestRejected("empty prompt")
        req.hash_prompt(self.block_size, self.chunk_tokens)
        req.state = WAITING
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.loading or self.running)

    def abort(self, req: SimRequest) -> None:
        """A client went away: free what the request holds."""
        if req in self.waiting:
            self.waiting.remove(req)
        elif req.state in (RUNNING, LOADING):
            if req in self.running:
                self.running.remove(req)
            self.loading.pop(id(req), None)
            self.pool.release(req.blocks)
            req.blocks = []
        req.state = FINISHED
        req.finish_reason = req.finish_reason or "abort"

    # ---- one step --------------------------------------------------------------------------------
    def step(self) -> StepResult:
        self._collect_loads()
        work = self._schedule()
        if not work:
            return self._wait_for_loads()
        duration = self.model.step_seconds([ScheduledWork(n, r.computed, r.in_prefill) for r, n in work])
        self.now += duration
        result = StepResult(duration)
        for req, n in work:
            self._apply(req, n, result)
        self._collect_loads()
        return result

    def _wait_for_loads(self) -> StepResult:
        ready = self.tiers.next_completion()
        if ready is None or ready <= self.now:
            if ready is not None:
                self._collect_loads()
            return StepResult(0.0)
        start = self.now
        self.now = ready
        self._collect_loads()
        return StepResult(ready - start)

    def idle_until(self, when: float) -> None:
        """Move the clock forward while nothing runs (the HTTP server follows wall time when idle)."""
        if when > self.now:
            self.now = when
            self._collect_loads()

    def next_event_delay(self) -> float | None:
        """0 if a step can run now, else the wait for the next transfer or arrival; None if there is none."""
        if self.running or (self.waiting and self.waiting[0].arrival <= self.now):
            return 0.0
        events = [t for t in (self.tiers.next_completion(), self.waiting[0].arrival if self.waiting else None)
                  if t is not None]
        return max(min(events) - self.now, 0.0) if events else None

    # ---- scheduling ------------------------------------------------------------------------------
    def _schedule(self) -> list[tuple[SimRequest, int]]:
        budget = self.token_budget
        work: list[tuple[SimRequest, int]] = []
        preempted = False
        for req in list(self.running):
            if budget <= 0:
                break
            if req.state != RUNNING:
                continue
            n = min(req.prefill_target - req.computed, budget) if req.in_prefill else 1
            if not self._reserve_blocks(req, n):
                preempted = True
                continue
            work.append((req, n))
            budget -= n
        if not preempted:
            budget = self._admit_waiting(budget, work)
        return work

    def _reserve_blocks(self, req: SimRequest, n: int) -> bool:
        """Blocks for n more tokens; preempt the newest running requests until they fit (False: req was)."""
        need = math.ceil((req.computed + n) / self.block_size) - len(req.blocks)
        while need > 0:
            got = self.pool.grow(need)
            if got is not None:
                req.blocks.extend(got)
                return True
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
        return True

    def _preempt(self, req: SimRequest) -> None:
        """Recompute preemption: drop the KV, requeue at the front; prompt and output get prefilled again."""
        self.running.remove(req)
        self.pool.release(req.blocks)
        req.blocks = []
        req.computed = 0
        req.registered_blocks = 0
        req.prefill_target = req.prompt_len + req.generated
        req.state = WAITING
        req.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(req)

    def _admit_waiting(self, budget: int, work: list[tuple[SimRequest, int]]) -> int:
        """Admit waiting requests in order; one stamped after the clock (the HTTP runner resumed the engine at an
        earlier arrival) waits for a step that starts after its arrival."""
        while self.waiting and budget > 0 and len(self.running) + len(self.loading) < self.max_num_seqs:
            req = self.waiting[0]
            if req.arrival > self.now:
                break
            hits = self._hbm_prefix(req)
            total_blocks = math.ceil(req.prefill_target / self.block_size)
            blocks = self.pool.acquire(hits, total_blocks - len(hits))
            if blocks is None:
                break
            self.waiting.popleft()
            req.blocks = blocks
            req.computed = len(hits) * self.block_size
            req.registered_blocks = len(hits)
            self._count_prefix_query(req, req.computed)
            if self.offload and self._start_tier_loads(req):
                continue
            req.state = RUNNING
            self.running.append(req)
            n = min(req.prefill_target - req.computed, budget)
            work.append((req, n))
            budget -= n
        return budget

    def _hbm_prefix(self, req: SimRequest) -> list[int]:
        hits = self.pool.match_prefix(req.block_keys)
        while hits and len(hits) * self.block_size >= req.prefill_target:
            hits = hits[:-1]  # at least one token is computed to sample from
        return hits

    def _count_prefix_query(self, req: SimRequest, hit_tokens: int) -> None:
        self.stats.prefix_queries += req.prefill_target
        self.stats.prefix_hits += hit_tokens
        if req.preemptions == 0:
            req.cached_tokens = hit_tokens
            self.stats.prompt_tokens += req.prompt_len

    def _start_tier_loads(self, req: SimRequest) -> bool:
        """Look the rest of the prompt up in L1 then L2; start the reads. True if the request must wait."""
        loads = self.tiers.lookup(req, self.stats)
        if not loads:
            return False
        for tier_name, first_token, tokens in loads:
            transfer = self.tiers.start_read(tier_name, req, first_token, tokens, self.now, self.stats)
            req.pending_transfers.add((tier_name, transfer.id))
            req.tier_tokens[tier_name] = req.tier_tokens.get(tier_name, 0) + tokens
            req.computed = max(req.computed, first_token + tokens)
        req.state = LOADING
        self.loading[id(req)] = req
        return True

    def _collect_loads(self) -> None:
        for tier_name, transfer in self.tiers.advance(self.now):
            for req in list(self.loading.values()):
                req.pending_transfers.discard((tier_name, transfer.id))
        for key, req in list(self.loading.items()):
            if not req.pending_transfers:
                del self.loading[key]
                req.state = RUNNING
                self.running.append(req)

    # ---- applying a step -------------------------------------------------------------------------
    def _apply(self, req: SimRequest, n: int, result: StepResult) -> None:
        was_prefill = req.in_prefill
        req.computed += n
        if was_prefill:
            self._register_blocks(req)
        if req.in_prefill:
            return
        if was_prefill and self.offload and not req.offloaded:
            self.tiers.store(req, self.stats)
            req.offloaded = True
        self._emit_token(req, result)

    def _register_blocks(self, req: SimRequest) -> None:
        full = min(req.computed, req.prompt_len) // self.block_size
        if full > req.registered_blocks:
            start = req.registered_blocks
            self.pool.register(req.blocks[start:full], req.block_keys[start:full])
        req.registered_blocks = max(req.registered_blocks, full)

    def _emit_token(self, req: SimRequest, result: StepResult) -> None:
        req.generated += 1
        self.stats.generation_tokens += 1
        if req.first_token_at is None:
            req.first_token_at = self.now
            self.stats.ttft.observe(self.now - req.arrival)
        elif req.last_token_at is not None:
            self.stats.tpot.observe(self.now - req.last_token_at)
        req.last_token_at = self.now
        result.emitted.append(req)
        if req.sink:
            req.sink("token", req)
        if req.generated >= req.max_tokens:
            self._finish(req, result)

    def _finish(self, req: SimRequest, result: StepResult) -> None:
        self.running.remove(req)
        self.pool.release(req.blocks)
        req.blocks = []
        req.state = FINISHED
        req.finished_at = self.now
        req.finish_reason = "length"
        self.stats.requests_finished += 1
        self.stats.e2e.observe(self.now - req.arrival)
        result.finished.append(req)
        if req.sink:
            req.sink("finished", req)

    # ---- resets ----------------------------------------------------------------------------------
    def reset_prefix_cache(self) -> int:
        return self.pool.reset_prefix_cache()

    def reset_tiers(self, tiers: tuple[str, ...] = ("l1", "l2")) -> dict[str, int]:
        return self.tiers.clear(tiers)
