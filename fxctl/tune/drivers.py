"""Where trials run: the emulator over HTTP (`sim`), a running server (`url`), the emulator's engine in
virtual time (`virtual`: no HTTP, seconds instead of minutes; for search tests and the search-cost
benchmark). Each measures one (server settings, concurrency) point and returns a loadgen-style result."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fxctl.errors import BadInput
from fxctl.loadgen.generator import LoadSpec
from fxctl.loadgen.generator import run as run_load
from fxctl.loadgen.metrics import Limit, RequestRecord, summarize
from fxctl.loadgen.workloads import WorkloadSpec
from fxctl.tune.profiles import settings_key, write_profile
from fxctl.tune.server import ServerProcess, sim_argv


@dataclass
class TrialLoad:
    workload: WorkloadSpec
    requests_per_client: int
    slo: list[Limit]
    time_limit_s: float
    time_scale: float
    clock: str


class SimDriver:
    """`fxctl sim serve` restarted (in its own process group) only when the server settings change."""

    def __init__(self, profile_path: Path, run_dir: Path):
        self.profile_path = profile_path
        self.run_dir = run_dir
        self.server: ServerProcess | None = None
        self.settings_key: str | None = None

    def ensure(self, settings: dict, time_scale: float) -> str:
        key = settings_key(settings) + f"@{time_scale}"
        if self.server is None or key != self.settings_key:
            self.close()
            path = write_profile(self.profile_path, settings,
                                 self.run_dir / "profiles" / f"{settings_key(settings)}.yaml",
                                 note="server settings of one tuning configuration")
            self.server = ServerProcess(sim_argv(str(path), time_scale), self.run_dir / "server.log")
            self.server.start()
            self.settings_key = key
        return self.server.url

    def measure(self, settings: dict, concurrency: int, load: TrialLoad, progress: Callable | None) -> dict:
        url = self.ensure(settings, load.time_scale)
        return run_load(load_spec(url, concurrency, load), progress)

    def close(self) -> None:
        if self.server:
            self.server.stop()
        self.server = None


ROUTER_POLICY = "serving.router.policy"


class UrlDriver:
    """A server someone else runs: only the load can change, and, when the URL is the router of a deployment
    `fxctl serve` made on this machine, the router's policy (fxctl.serve restarts the router; the engines stay)."""

    def __init__(self, url: str):
        self.url = url
        self.policy: str | None = None

    def measure(self, settings: dict, concurrency: int, load: TrialLoad, progress: Callable | None) -> dict:
        if set(settings) - {ROUTER_POLICY}:
            raise BadInput("--url tunes load and the router's policy only: other server settings need --target sim "
                           "or vllm", f"drop --param except {ROUTER_POLICY}")
        if ROUTER_POLICY in settings and settings[ROUTER_POLICY] != self.policy:
            from fxctl.serve.deploy import switch_local_policy

            switch_local_policy(self.url, settings[ROUTER_POLICY])
            self.policy = settings[ROUTER_POLICY]
        return run_load(load_spec(self.url, concurrency, load), progress)

    def close(self) -> None:
        pass


def load_spec(url: str, concurrency: int, load: TrialLoad) -> LoadSpec:
    return LoadSpec(url, load.workload, concurrency=concurrency, requests=concurrency * load.requests_per_client,
                    time_limit_s=load.time_limit_s, time_scale=load.time_scale, slo=load.slo, clock=load.clock,
                    reset_caches=True)


class VirtualDriver:
    """The emulator's engine in virtual time, driven by closed-loop clients exactly as the HTTP server
    would be (same engine, same workload shape); no HTTP, no sleeping."""

    def __init__(self, profile_path: Path):
        from fxctl.sim.profile import load_profile

        self.profile = load_profile(str(profile_path))

    def measure(self, settings: dict, concurrency: int, load: TrialLoad, progress: Callable | None) -> dict:
        from fxctl.sim.engine import Engine
        from fxctl.sim.virtual import distinct_prompts

        profile = self.profile.with_overrides(**{k.replace(".", "__"): v for k, v in settings.items()})
        block = profile.calibration.get("block_size")
        if block:  # the calibration's bookkeeping shortcut: same capacity, fewer blocks
            profile = profile.with_overrides(serving__block_size=int(block))
        started = time.perf_counter()
        spec = load.workload
        mean = (spec.min_tokens + spec.max_tokens) // 2
        spread = (spec.max_tokens - spec.min_tokens) / (2 * mean) if mean else 0.0
        prompts = distinct_prompts(concurrency * load.requests_per_client, mean, spread, seed=concurrency)
        engine = Engine(profile)
        keys: dict = {}
        if spec.name == "cold-recovery" and engine.offload:
            closed_loop(engine, prompts, concurrency, spec.output_tokens, keys)
            engine.reset_prefix_cache()
            engine.reset_tiers(("l1",))
        start = engine.now
        done = closed_loop(engine, prompts, concurrency, spec.output_tokens, keys)
        records = [RequestRecord(True, r.prompt_len, r.generated, r.ttft(), r.e2e()) for r in done]
        result = summarize(records, engine.now - start, load.slo)
        result.update({"workload": spec.name, "clock": "virtual", "max_concurrency": concurrency,
                       "num_prompts": len(prompts), "wall_s": time.perf_counter() - started})
        return result

    def close(self) -> None:
        pass


def closed_loop(engine, prompts: list[list[int]], concurrency: int, output_tokens: int, keys: dict) -> list:
    from collections import deque

    from fxctl.sim.request import SimRequest

    queue = deque(prompts)
    done = []

    def submit() -> None:
        prompt = queue.popleft()
        req = SimRequest(f"v{len(done)}-{len(queue)}", prompt, output_tokens, arrival=engine.now,
                         block_keys=keys.get(id(prompt), []))
        engine.add_request(req)
        keys[id(prompt)] = req.block_keys

    for _ in range(min(concurrency, len(queue))):
        submit()
    for _ in range(10_000_000):
        if not engine.has_work():
            break
        result = engine.step()
        for req in result.finished:
            done.append(req)
            if queue:
                submit()
    return done
