"""What `fxctl serve start` and `serve monitor` can set over the profile and the inventory's serve section:
each option declared once (fxctl.options), None where the command line said nothing, so the layer below
decides (fxctl.serve.settings.settings_from: profile, then inventory, then these)."""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.inventory.validators import parse_size
from fxctl.options import option
from fxctl.serve.listen import METRICS_ADDRESSES
from fxctl.serve.router_settings import DEFAULT_POLICY
from fxctl.serve.router_settings import POLICIES as ROUTER_POLICIES
from fxctl.serve.settings import OFFLOADS


def positive_size(text: str) -> int:
    """--l1-size / --l2-size: '64GiB' -> bytes; ValueError for anything that is not a size above 0."""
    size = parse_size(text)
    if not size:
        raise ValueError(f"{text!r} is not a size like 64GiB")
    return size


@dataclass
class ServeOverrides:
    profile_name: str | None = option("--profile", "Profile in profiles/ or a YAML path (default: the "
                                      "inventory's serve.profile).", default=None)
    engine: str | None = option("--engine", "vllm (default) or sim: fxctl's emulator with the same profile.",
                                default=None, choices=("vllm", "sim"))
    offload: str | None = option(
        "--offload", "KV below vLLM: fxctl's tier (default); LMCache's own, as comparison anchors: the fs_native, "
        "fs or raw_block L2 adapter of its MP server, or its in-process disk tier (lmcache-disk); or none "
        "(recompute).", default=None, choices=OFFLOADS)
    lmcache_mode: str | None = option(
        "--lmcache-mode", "LMCache's multi-process server (the default, on GPU and CPU hosts alike) or its "
        "deprecated in-process plugin (where --offload lmcache-disk needs it, or to keep serving a warm "
        "in-process tier).", default=None, choices=("mp", "in-process"))
    model: str | None = option("--model", "Model id (default: the profile's).", default=None)
    tensor_parallel: int | None = option("--tp", "Tensor-parallel size per instance.", default=None, min=1, max=64)
    pipeline_parallel: int | None = option(
        "--pp", "Pipeline-parallel stages: > 1 serves one model across that many hosts (one stage per host, --tp "
        "within it) with a Ray cluster under vLLM (head on the first host); needs --offload none.", default=None,
        min=1, max=64)
    instances: int | None = option("--instances", "Instances per host.", default=None, min=1, max=64)
    port: int | None = option("--port", "First instance's port (instance i: port + i; default 8000).",
                              default=None, min=1, max=65535)
    max_num_seqs: int | None = option("--max-num-seqs", "vLLM --max-num-seqs.", default=None, min=1, max=65536)
    l1_bytes: int | None = option("--l1-size", "DRAM tier per host (LMCache's CPU pool), e.g. 64GiB.",
                                  default=None, parse=positive_size)
    l2_bytes: int | None = option("--l2-size", "L2 per host, e.g. 2TiB.", default=None, parse=positive_size)
    l2_dir: str | None = option("--l2-dir", "L2 directory on the array's mount (default: the inventory's "
                                "serve.l2_dir, or <the host's array mount>/fxtier).", default=None)
    python: str | None = option("--python", "Python of the serving env (vllm is beside it).", default=None)
    time_scale: float | None = option("--time-scale", "Emulator only: wall seconds per model second (default 1).",
                                      default=None, min=0)
    router_mode: str | None = option(
        "--router", "vllm-router in front of the instances: auto (default: when there is more than one vLLM over "
        "all hosts), on, off. Runs on serve.router.host or the first serving host.", default=None,
        choices=("auto", "on", "off"))
    router_policy: str | None = option(
        "--router-policy", "The router's policy (default: serve.router.policy, the profile's "
        f"serving.router.policy, else {DEFAULT_POLICY}).", default=None, choices=ROUTER_POLICIES)
    router_port: int | None = option("--router-port", "The router's port (default: first vLLM port + 80; its "
                                     "metrics: the next one).", default=None, min=1, max=65534)
    metrics_address: str | None = option(
        "--metrics-address", "Where fxctl's tier and the router serve their metrics: 127.0.0.1 (the default) or "
        "0.0.0.0, for a Prometheus on another machine (fxctl serve monitor).", default=None,
        choices=METRICS_ADDRESSES)
    engine_command: str | None = option("--engine-command", "Testing: replace the engine's argv (shell words).",
                                        default=None, hidden=True)
