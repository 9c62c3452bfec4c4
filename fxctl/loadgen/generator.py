"""The serving load generator: an aiohttp streaming client, closed loop or open loop (Poisson), bounded.

Every run has a request count and a wall-clock limit; requests still running at the limit are cancelled
and counted as failed ("time limit"). Times are divided by `time_scale` (the emulator's wall seconds per
model second), so figures against `fxctl sim serve --time-scale S` read in model seconds.
Cold recovery: phase 1 sends every prompt (fills the tiers), phase 2 evicts HBM's prefix cache
(POST /reset_prefix_cache) and L1 (POST /reset_tiers {"tiers": ["l1"]}), phase 3 replays and is measured.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from fxctl.loadgen.metrics import (
    Limit,
    RequestRecord,
    on_model_clock,
    per_token_gaps,
    summarize,
)
from fxctl.loadgen.workloads import (
    Prompt,
    WorkloadSpec,
    chat_body,
    chat_sessions,
    completion_prompts,
    dataset_prompts,
)
from fxctl.serve.replica_metrics import parse_counters, tier_hit_rates

JSON = {"Content-Type": "application/json"}
Progress = Callable[[list[RequestRecord], float], None]


@dataclass
class LoadSpec:
    url: str
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    concurrency: int | None = 8          # closed loop (or the cap of an open loop)
    rate: float | None = None            # open loop: Poisson arrivals per model second
    requests: int = 64                   # measured prompts (multi-turn: sessions)
    warmup: int = 0                      # excluded from the results
    time_limit_s: float = 600.0          # wall seconds for the whole run
    time_scale: float = 1.0
    model: str | None = None
    slo: list[Limit] | None = None
    nonce: int | None = None             # salts the prompts: two runs never share a prefix
    request_timeout_s: float = 600.0
    seed: int = 0
    clock: str = "wall"                  # "model": the emulator's own TTFT/E2EL and model-time duration
    reset_caches: bool = False           # first empty HBM's prefix cache and L1/L2 (between tuning trials)
    # cold recovery's eviction, when not the reset endpoints: e.g. a full restart of the serving processes
    # (blocking; returns what it did, kept in the result's phases)
    evict: Callable[[], dict] | None = None
    tier_metrics: tuple[str, ...] = ()   # endpoints of fxctl's tier (LMCache MP: the server's metrics port)
    # behind a router (`url` is the router): each replica's base URL. The reset endpoints and /metrics go to
    # every replica (a router passes them to one), their counters summed
    replicas: tuple[str, ...] = ()


# the header a client names its session with; vllm-router's consistent_hash keys on it (without it, on the request
# text, and a prompt of token ids has none: every such request would hash alike)
SESSION_HEADER = "x-session-id"


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str, time_scale: float, replicas: tuple[str, ...] = ()):
        self.session = session
        self.base = base.rstrip("/")
        self.scale = time_scale if time_scale > 0 else 1.0
        self.servers = tuple(r.rstrip("/") for r in replicas) or (self.base,)   # what serves: the replicas or base

    async def stream(self, path: str, body: bytes, prompt_tokens: int,
                     session: str | None = None) -> tuple[RequestRecord, str]:
        """POST, read the SSE stream; the record and the generated text. `session` names the request's
        session (SESSION_HEADER): a router that keys on it sends a prompt and its replay to one replica."""
        start = time.perf_counter()
        chunk_times: list[float] = []
        text: list[str] = []
        logprobs: list[float] = []
        usage: dict = {}
        sim: dict = {}
        try:
            headers = {**JSON, SESSION_HEADER: session} if session else JSON
            async with self.session.post(self.base + path, data=body, headers=headers) as resp:
                if resp.status != 200:
                    return RequestRecord(False, error=f"HTTP {resp.status}: {(await resp.text())[:200]}"), ""
                async for raw in resp.content:
                    if not raw.startswith(b"data:"):
                        continue
                    data = raw[5:].strip()
                    if data == b"[DONE]":
                        break
                    event = json.loads(data)
                    choices = event.get("choices") or ()
                    if choices:
                        piece = choices[0].get("text") if "text" in choices[0] else \
                            (choices[0].get("delta") or {}).get("content")
                        if piece:
                            chunk_times.append(time.perf_counter())
                            text.append(piece)
                        logprobs.extend((choices[0].get("logprobs") or {}).get("token_logprobs") or ())
                    if event.get("usage"):
                        usage, sim = event["usage"], event.get("fxctl_sim") or {}
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return RequestRecord(False, error=f"{type(exc).__name__}: {exc}"), ""
        end = time.perf_counter()
        if not chunk_times:
            return RequestRecord(False, error="no token streamed"), ""
        rel = [(t - start) / self.scale for t in chunk_times]
        out = int(usage.get("completion_tokens", len(chunk_times)))
        record = RequestRecord(True, int(usage.get("prompt_tokens", prompt_tokens)), out, ttft=rel[0],
                               e2el=(end - start) / self.scale, itl=per_token_gaps(rel, out),
                               model_ttft=sim.get("model_ttft_s"), model_e2el=sim.get("model_e2e_s"),
                               token_logprobs=logprobs or None, text="".join(text) if logprobs else None)
        return record, "".join(text)

    async def post(self, path: str, payload: dict | None = None) -> int:
        """POST to every server; the first status that is not 200 (200 when all are)."""
        statuses = []
        for server in self.servers:
            async with self.session.post(server + path, json=payload or {}) as resp:
                await resp.read()
                statuses.append(resp.status)
        return next((s for s in statuses if s != 200), 200)

    async def scrape(self, extra: tuple[str, ...] = ()) -> dict[str, float]:
        """The server's /metrics (every replica's, summed), and any other endpoints (e.g. fxctl's tier beside
        LMCache's server)."""
        counters: dict[str, float] = {}
        for server in self.servers:
            try:
                async with self.session.get(server + "/metrics") as resp:
                    for key, value in (parse_counters(await resp.text()) if resp.status == 200 else {}).items():
                        counters[key] = counters.get(key, 0.0) + value
            except aiohttp.ClientError:
                continue
        for url in extra:
            try:
                async with self.session.get(url) as resp:
                    counters.update(parse_counters(await resp.text()) if resp.status == 200 else {})
            except aiohttp.ClientError:
                continue
        return counters

    async def model_name(self) -> str | None:
        try:
            async with self.session.get(self.base + "/v1/models") as resp:
                data = await resp.json()
                return data["data"][0]["id"]
        except (aiohttp.ClientError, KeyError, IndexError, ValueError):
            return None


async def run_item(client: Client, item, records: list[RequestRecord], model: str | None,
                   on_done: Callable[[], None], worker: int = -1, queued: float = 0.0) -> None:
    """One prompt, or one whole chat session; a cancelled request is recorded as failed."""
    try:
        if isinstance(item, Prompt):
            record, _ = await client.stream(item.path, item.body, item.prompt_tokens,
                                            f"prompt-{item.index}" if item.index >= 0 else None)
            record.client, record.queued, record.index = worker, queued, item.index
            records.append(record)
            on_done()
            return
        for turn in range(item.turns):
            record, reply = await client.stream("/v1/chat/completions", chat_body(item, turn, model), 0)
            record.client, record.queued = worker, queued if turn == 0 else 0.0
            records.append(record)
            on_done()
            if not record.ok:
                return
            item.messages.append({"role": "assistant", "content": reply})
            if item.think_time_s and turn + 1 < item.turns:
                await asyncio.sleep(item.think_time_s * client.scale)
    except asyncio.CancelledError:
        records.append(RequestRecord(False, error="time limit"))
        raise


async def closed_loop(client: Client, items: list, concurrency: int, deadline: float, model: str | None,
                      on_done: Callable[[], None], records: list[RequestRecord] | None = None
                      ) -> tuple[list[RequestRecord], bool]:
    records = [] if records is None else records
    queue = iter(items)

    async def worker(number: int) -> None:
        for item in queue:   # one iterator shared by the workers (one thread: no race)
            await run_item(client, item, records, model, on_done, number)

    tasks = [asyncio.create_task(worker(n)) for n in range(max(1, min(concurrency, len(items))))]
    return records, await finish(tasks, deadline)


async def open_loop(client: Client, items: list, rate: float, cap: int | None, deadline: float,
                    model: str | None, on_done: Callable[[], None], seed: int,
                    records: list[RequestRecord]) -> tuple[list[RequestRecord], bool]:
    rng = random.Random(seed)
    limit = asyncio.Semaphore(cap) if cap else None

    async def one(item) -> None:
        if limit is None:
            return await run_item(client, item, records, model, on_done)
        arrived = time.perf_counter()
        async with limit:   # client-side queueing: TTFT counts from the send (as vLLM bench); the wait apart
            await run_item(client, item, records, model, on_done,
                           queued=(time.perf_counter() - arrived) / client.scale)

    tasks = []
    for item in items:
        if time.monotonic() >= deadline:
            break
        tasks.append(asyncio.create_task(one(item)))
        await asyncio.sleep(rng.expovariate(rate) * client.scale)
    return records, await finish(tasks, deadline)


async def finish(tasks: list[asyncio.Task], deadline: float) -> bool:
    """Wait for the tasks until the deadline; cancel the rest. True if any had to be cancelled."""
    if not tasks:
        return False
    _, pending = await asyncio.wait(tasks, timeout=max(deadline - time.monotonic(), 0.0))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()
    return bool(pending)


async def fill_and_evict(client: Client, items: list, concurrency: int, deadline: float, model: str | None,
                         notes: list[str], evict: Callable[[], dict] | None = None) -> dict:
    """Cold recovery's phases 1 and 2: send every prompt (the tiers fill), then evict HBM's prefix cache
    and L1 (or run `evict`, e.g. restart the serving processes), so that phase 3 finds the prompts' KV only
    in L2."""
    started = time.perf_counter()
    fill, cut = await closed_loop(client, items, concurrency, deadline, model, lambda: None)
    phases = {"fill": {"completed": sum(r.ok for r in fill), "failed": sum(not r.ok for r in fill),
                       "duration": (time.perf_counter() - started) / client.scale, "timed_out": cut,
                       "logprobs": {r.index: r.token_logprobs for r in fill if r.token_logprobs},
                       "texts": {r.index: r.text for r in fill if r.token_logprobs}}}
    if evict is not None:
        phases["evict"] = await asyncio.to_thread(evict)
        return phases
    phases["evict"] = {"reset_prefix_cache": await client.post("/reset_prefix_cache"),
                       "reset_tiers_l1": await client.post("/reset_tiers", {"tiers": ["l1"]})}
    if phases["evict"]["reset_tiers_l1"] != 200:
        notes.append("the server has no /reset_tiers: L1 was not evicted (HBM prefix cache was)")
    return phases


def make_items(spec: LoadSpec, count: int, nonce: int, model: str | None, first: int,
               dataset_start: int = 0) -> list:
    if spec.workload.name == "multi-turn":
        return chat_sessions(spec.workload, count, nonce, first)
    if spec.workload.dataset:  # warmup takes the file's first lines, the measured requests the next ones
        return dataset_prompts(spec.workload, dataset_start, count, model)
    return completion_prompts(spec.workload, count, nonce, model, first)


async def run_load(spec: LoadSpec, progress: Progress | None = None) -> dict:
    deadline = time.monotonic() + spec.time_limit_s
    nonce = spec.nonce if spec.nonce is not None else random.SystemRandom().randrange(1 << 40)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=spec.request_timeout_s)
    # a restart between phases drops the server's end of kept-alive connections: open one per request then
    connector = aiohttp.TCPConnector(limit=0, force_close=spec.evict is not None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        client = Client(session, spec.url, spec.time_scale, spec.replicas)
        model = spec.model or await client.model_name()
        concurrency = spec.concurrency or 8
        notes: list[str] = []
        phases: dict[str, dict] = {}
        if spec.reset_caches:
            phases["reset"] = {"reset_prefix_cache": await client.post("/reset_prefix_cache"),
                               "reset_tiers": await client.post("/reset_tiers", {"tiers": ["l1", "l2"]})}
        if spec.warmup:
            warm = make_items(spec, spec.warmup, nonce, model, first=1 << 20)
            await closed_loop(client, warm, concurrency, deadline, model, lambda: None)
        items = make_items(spec, spec.requests, nonce, model, first=0, dataset_start=spec.warmup)
        if spec.workload.name == "cold-recovery":
            phases.update(await fill_and_evict(client, items, concurrency, deadline, model, notes, spec.evict))
        before = await client.scrape(spec.tier_metrics)
        records: list[RequestRecord] = []
        started = time.perf_counter()

        def on_done() -> None:
            if progress:
                progress(records, (time.perf_counter() - started) / client.scale)

        if spec.rate:
            _, cut = await open_loop(client, items, spec.rate, spec.concurrency, deadline, model, on_done,
                                     spec.seed, records)
        else:
            _, cut = await closed_loop(client, items, concurrency, deadline, model, on_done, records)
        duration = (time.perf_counter() - started) / client.scale
        after = await client.scrape(spec.tier_metrics)
    wall = summarize(records, duration, spec.slo)
    result = wall
    if spec.clock == "model":
        result = model_clock_result(records, before, after, spec.slo, wall,
                                    closed=not spec.rate and not spec.workload.think_time_s)
    result.update({
        "workload": spec.workload.name, "workload_spec": vars(spec.workload), "url": spec.url,
        "model_id": model, "mode": "open" if spec.rate else "closed", "max_concurrency": spec.concurrency,
        "request_rate": spec.rate or "inf", "num_prompts": spec.requests, "warmup": spec.warmup,
        "time_scale": spec.time_scale, "timed_out": cut, "nonce": nonce, "clock": spec.clock,
        "tier_hits": tier_hit_rates(before, after) if before and after else None,
        "phases": phases, "notes": notes, "slo": [str(limit) for limit in spec.slo or []],
        "logprobs": {r.index: r.token_logprobs for r in records if r.token_logprobs},
        "texts": {r.index: r.text for r in records if r.token_logprobs},
        "ttfts": {r.index: r.ttft for r in records if r.ok and r.ttft is not None and r.index >= 0},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return result


MODEL_CLOCK = "fxctl_sim_model_time_seconds"


def model_clock_result(records: list[RequestRecord], before: dict, after: dict, slo, wall: dict,
                       closed: bool = True) -> dict:
    """Figures in the emulator's model time: its per-request TTFT/E2EL; the duration from its clock (open
    loop) or from the clients' model-time busy spans (closed loop).

    Against `fxctl sim` at a small time scale the emulator's own CPU time (parsing long prompts, hashing
    blocks) is not GPU time, but a scaled wall clock would count it many times over."""
    clock = [v for k, v in after.items() if k.startswith(MODEL_CLOCK)]
    clock0 = [v for k, v in before.items() if k.startswith(MODEL_CLOCK)]
    if not clock or not clock0 or any(r.ok and r.model_ttft is None for r in records):
        from fxctl.errors import BadInput
        raise BadInput("--clock model needs a server that reports model time (fxctl sim serve)",
                       "use --clock wall against other servers")
    duration = clock[0] - clock0[0]
    busy: dict[int, float] = {}
    for r in records:
        if r.ok and r.client >= 0:
            busy[r.client] = busy.get(r.client, 0.0) + r.model_e2el
    if closed and busy and all(r.client >= 0 for r in records) and not any(r.error == "time limit" for r in records):
        # closed loop: the busiest client's model time, as if each sent its next request at once (the
        # emulator's clock also runs, at wall speed / time scale, while it waits for the client's next one)
        duration = max(busy.values())
    result = summarize([on_model_clock(r) for r in records], duration, slo)
    result["itl_clock"] = "wall"   # chunk gaps are only seen by the client: wall time / time scale
    result["wall_clock"] = {k: wall[k] for k in ("duration", "output_throughput", "median_ttft_ms",
                                                  "p99_ttft_ms", "median_tpot_ms")}
    return result


def run(spec: LoadSpec, progress: Progress | None = None) -> dict:
    """Run the load (blocking)."""
    return asyncio.run(run_load(spec, progress))
