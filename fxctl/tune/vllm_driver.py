"""Tuning the real engine: vLLM + LMCache + fxctl's tier started through `fxctl serve` on this machine.

Server settings (the outer loop) are the profile's keys, as for the emulator: `serving.max_num_seqs`,
`tiers.l1_size_gb` (LMCache's DRAM pool), `tiers.l2_size_gb` (fxctl's tier), and `serving.offload`
(False: no KV offload, the recompute baseline). The deployment is restarted only when they change; each
configuration's tier starts empty. On the real engine a cold-recovery trial evicts vLLM's own prefix cache
through its dev-mode endpoint (the deployment runs with VLLM_SERVER_DEV_MODE=1), so the replay's KV comes
from LMCache's DRAM pool and fxctl's tier, not from vLLM.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace

from fxctl.errors import FxError
from fxctl.loadgen.generator import run as run_load
from fxctl.tune.profiles import settings_key

NAME = "tune"


@dataclass(frozen=True)
class VllmDriverSpec:
    profile: str                 # a real-serving profile (e.g. cpu-tiny)
    python: str                  # the serving env's interpreter
    model: str
    l2_dir: str
    port: int = 8300
    ready_timeout_s: float = 900.0


def deployment(spec: VllmDriverSpec, settings: dict):
    from fxctl.serve.deploy import local_state_dir
    from fxctl.serve.settings import settings_from
    from fxctl.sim.profile import load_profile

    profile = load_profile(spec.profile).with_overrides(
        **{key.replace(".", "__"): value for key, value in settings.items() if key != "serving.offload"})
    offload = "none" if settings.get("serving.offload") is False else "fxctl"
    serve = settings_from(profile, name=NAME, offload=offload, model=spec.model, python=spec.python,
                          l2_dir=spec.l2_dir, port=spec.port, state_dir=local_state_dir(), profile=spec.profile)
    return replace(serve, dev_endpoints=True)


class VllmDriver:
    """Real vLLM restarted (through fxctl serve) only when the server settings change."""

    def __init__(self, spec: VllmDriverSpec):
        self.spec = spec
        self.running = None
        self.key: str | None = None

    def ensure(self, settings: dict) -> str:
        from fxctl.serve import deploy

        key = settings_key(settings)
        if self.running is None or key != self.key:
            self.close()
            serve = deployment(self.spec, settings)
            shutil.rmtree(f"{serve.l2_dir}/{serve.name}-0", ignore_errors=True)   # each configuration: empty
            outcome = deploy.start(serve, deploy.Where(), ready_timeout=self.spec.ready_timeout_s)["local"]
            if not outcome.ok:
                raise FxError(f"starting vLLM for {key or 'the default settings'} failed: {outcome.error}",
                              outcome.hint)
            self.running, self.key = serve, key
        return f"http://127.0.0.1:{self.spec.port}"

    def measure(self, settings: dict, concurrency: int, load, progress: Callable | None) -> dict:
        from fxctl.loadgen.cold_restart import model_vocab
        from fxctl.tune.drivers import load_spec

        url = self.ensure(settings)
        workload = replace(load.workload, vocab=model_vocab(self.spec.model))
        return run_load(load_spec(url, concurrency, replace(load, workload=workload)), progress)

    def close(self) -> None:
        from fxctl.serve import deploy

        if self.running is not None:
            deploy.stop(deploy.Where(), self.running.state_dir, self.running.name)
        self.running = None
