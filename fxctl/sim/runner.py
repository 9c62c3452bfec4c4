"""Runs the engine in real time for the HTTP server: steps back to back, sleeping each step's model time
times the time scale, and hands tokens to the waiting responses after the sleep (when they "happen").

Model time stays the truth: a request's arrival is stamped in model time, interpolated inside the step
in progress, so reported figures do not depend on how fast this machine runs the Python.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from fxctl.sim.engine import Engine, StepResult
from fxctl.sim.request import SimRequest

log = logging.getLogger(__name__)
STALL_SLEEP_S = 0.001


@dataclass
class TokenEvent:
    kind: str                 # "token" or "finished"
    index: int = 0            # 1-based index of the generated token
    model_time: float = 0.0


@dataclass
class Stream:
    request: SimRequest
    events: asyncio.Queue = field(default_factory=asyncio.Queue)


class EngineRunner:
    def __init__(self, engine: Engine, time_scale: float):
        self.engine = engine
        self.time_scale = max(time_scale, 0.0)
        self.streams: dict[int, Stream] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._step_wall_start = time.monotonic()
        self._step_model_start = 0.0
        self._step_model_end = 0.0
        self._idle_since_wall = time.monotonic()
        self._pausing = True
        self._pause_until = float("inf")
        self._resume_at = float("inf")
        self.steps = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def model_now(self) -> float:
        """Model time now: inside the step being slept, or (idle, or only waiting on transfers) the engine
        clock plus scaled wall time."""
        wall = time.monotonic()
        if self._pausing:
            elapsed = (wall - self._idle_since_wall) / self.time_scale if self.time_scale else 0.0
            return min(self.engine.now + elapsed, self._pause_until)
        if self.time_scale <= 0:
            return self._step_model_start
        into_step = (wall - self._step_wall_start) / self.time_scale
        return min(self._step_model_start + into_step, self._step_model_end)

    def submit(self, req: SimRequest) -> Stream:
        """Queue a request (raises RequestRejected); its events arrive on the returned stream."""
        req.arrival = self.model_now()
        if self._pausing:  # the engine resumes at this arrival, not when the loop gets to run
            self._resume_at = min(self._resume_at, req.arrival)
        self.engine.add_request(req)
        stream = Stream(req)
        self.streams[id(req)] = stream
        self._wake.set()
        return stream

    def cancel(self, req: SimRequest) -> None:
        if self.streams.pop(id(req), None) is not None and req.finished_at is None:
            self.engine.abort(req)

    async def _loop(self) -> None:
        while True:
            delay = self.engine.next_event_delay() if self.engine.has_work() else None
            if delay is None or delay > 0:
                await self._pause(delay)
                continue
            self._step_model_start = self.engine.now
            self._step_wall_start = time.monotonic()
            result = self.engine.step()
            self._step_model_end = self.engine.now
            self.steps += 1
            await self._sleep_until_step_end(result)
            self._deliver(result)

    async def _pause(self, delay: float | None) -> None:
        """Nothing to compute: wait for a new request, or (delay) for the next transfer to finish."""
        self._pausing = True
        self._pause_until = float("inf") if delay is None else self.engine.now + delay
        self._idle_since_wall = time.monotonic()
        self._wake.clear()
        timeout = None if delay is None else delay * self.time_scale
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass
        now = min(self.model_now(), self._resume_at)
        if self.time_scale <= 0 and delay is not None and self._resume_at == float("inf"):
            now = self._pause_until  # flat out: the transfer is simply done
        self._pausing = False
        self._resume_at = float("inf")
        self.engine.idle_until(now)

    async def _sleep_until_step_end(self, result: StepResult) -> None:
        if result.duration <= 0 and not result.emitted:
            await asyncio.sleep(STALL_SLEEP_S)
            return
        target = self._step_wall_start + result.duration * self.time_scale
        delay = target - time.monotonic()
        await asyncio.sleep(max(delay, 0.0))

    def _deliver(self, result: StepResult) -> None:
        for req in result.emitted:
            stream = self.streams.get(id(req))
            if stream:
                stream.events.put_nowait(TokenEvent("token", req.generated, req.last_token_at or 0.0))
        for req in result.finished:
            stream = self.streams.pop(id(req), None)
            if stream:
                stream.events.put_nowait(TokenEvent("finished", req.generated, req.finished_at or 0.0))
