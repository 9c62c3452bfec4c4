"""LMCache's multi-process (MP) server with fxctl's tier as its L2 adapter, as values: the `lmcache server`
command line, its health checks, the tier's metrics endpoint, and the `--kv-transfer-config` that points
vLLM's LMCacheMPConnector at it. Pure functions (no LMCache import): `fxctl serve` runs what they return.

Read from LMCache 0.5.6 (lmcache/cli/commands/server.py and the option groups it registers,
lmcache/v1/multiprocess/http_apis/info_api.py, lmcache/cli/commands/ping.py) and vLLM's connector
(lmcache/integration/vllm/lmcache_mp_connector.py, which vLLM's LMCacheMPConnector resolves to):

- `--port` is the ZMQ request port vLLM connects to (`lmcache.mp.host` + `lmcache.mp.port`, host with its
  `tcp://` scheme); `--http-port` (default 8080) and `--http-host` (default 127.0.0.1) place the HTTP API
  (/healthcheck, /status), so several servers on one host need distinct pairs of both.
- `--l1-size-gb` is GiB (size_gb * 2**30) and needs `--eviction-policy`.
- `/healthcheck` answers 200 {"status": "healthy"} once the cache engine is up, 503 before; `lmcache ping
  kvcache --url http://HOST:HTTP_PORT` GETs it and exits 1 on anything but 200.
- The HTTP server mode serves no /metrics (LMCache's OTel metrics land in prometheus_client's default
  registry of the server process); the adapter's `metrics_port` serves them with the tier's.
- `--supported-transfer-mode auto` accepts both the server-driven path (CUDA IPC, vLLM on GPUs) and the
  engine-driven path (PREPARE/COMMIT: `lmcache bench server --mode cpu`); the default, lmcache_driven,
  refuses the second.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.units import GIB

ADAPTER_MODULE = "fxctl.integrations.lmcache.l2_adapter"
ADAPTER_CLASS = "FxTierL2Adapter"
CONNECTOR = "LMCacheMPConnector"
LOOPBACK = "127.0.0.1"


def lmcache_command(python_or_lmcache_bin: str) -> list[str]:
    """How to run LMCache's CLI: a python runs its module (`-P`: the working directory is not put on
    sys.path, so a stray file there cannot shadow a package); anything else is the `lmcache` script itself.
    (A venv built in one folder and moved keeps a stale shebang in its scripts: the python form avoids it.)"""
    if os.path.basename(python_or_lmcache_bin).startswith("python"):
        return [python_or_lmcache_bin, "-P", "-m", "lmcache.cli.main"]
    return [python_or_lmcache_bin]


def adapter_spec(l2_path: str, l2_bytes: int, metrics_port: int = 0, metrics_host: str = LOOPBACK,
                 **tier: Any) -> dict[str, Any]:
    """The `--l2-adapter` JSON of fxctl's tier: LMCache's `plugin` type loading FxTierL2Adapter.
    metrics_host: where its /metrics listens (loopback unless told); tier: further TierConfig fields
    (segment_bytes, io_threads, durable, direct_io ...)."""
    params: dict[str, Any] = {"l2_path": l2_path, "l2_bytes": int(l2_bytes), **tier}
    if metrics_port:
        params["metrics_port"] = int(metrics_port)
        if metrics_host != LOOPBACK:
            params["metrics_host"] = metrics_host
    return {"type": "plugin", "module_path": ADAPTER_MODULE, "class_name": ADAPTER_CLASS, "adapter_params": params}


# LMCache's own MP L2 adapters that find their data after a restart (serving-facts), as LMCache's docs configure
# them: fs_native and fs with O_DIRECT (bypassing the page cache, as for fxctl's tier) and an LRU eviction block
# (without one, max_capacity_gb only counts); raw_block on a preallocated file (its own index checkpoint).
LMCACHE_ADAPTERS = ("fs_native", "fs", "raw_block")
RAW_BLOCK_FILE = "raw_block.img"
RAW_BLOCK_HEADER = 4096   # raw_block's slot header (its header_bytes default): a slot is header + one chunk
RAW_BLOCK_META = 256 << 20   # its metadata region at the device's start (meta_total_bytes default)
FS_WORKERS = 16      # fs_native's C++ I/O threads: 16 measured best here (serving-facts), as fxctl's IO_THREADS


def lmcache_adapter_spec(kind: str, l2_path: str, l2_bytes: int, slot_bytes: int = 0) -> dict[str, Any]:
    """The `--l2-adapter` JSON of one of LMCache's own persistent adapters, sized like fxctl's tier.
    slot_bytes (raw_block): one chunk's bytes at most, a whole number of 4 KiB pages."""
    if kind not in LMCACHE_ADAPTERS:
        raise ValueError(f"not one of LMCache's persistent adapters: {kind!r} ({', '.join(LMCACHE_ADAPTERS)})")
    eviction = {"eviction_policy": "LRU"}
    if kind == "fs_native":
        return {"type": "fs_native", "base_path": l2_path, "use_odirect": True, "num_workers": FS_WORKERS,
                "max_capacity_gb": l2_bytes / 1e9, "eviction": eviction}
    if kind == "fs":
        return {"type": "fs", "base_path": l2_path, "use_odirect": True, "max_capacity_gb": l2_bytes / 1e9,
                "eviction": eviction}
    if slot_bytes <= 0 or slot_bytes % 4096:
        raise ValueError(f"raw_block needs slot_bytes, a positive multiple of 4096 (got {slot_bytes})")
    return {"type": "raw_block", "device_path": f"{l2_path}/{RAW_BLOCK_FILE}", "slot_bytes": slot_bytes,
            "capacity_bytes": RAW_BLOCK_META + max(1, int(l2_bytes) // slot_bytes) * slot_bytes,
            "io_engine": "posix"}


def server_argv(python_or_lmcache_bin: str, port: int, l1_bytes: int, l2_path: str, l2_bytes: int,
                metrics_port: int = 0, *, http_port: int = 8080, host: str = LOOPBACK,
                chunk_size: int = CHUNK_TOKENS,
                eviction_policy: str = "LRU", transfer_mode: str = "auto", instance_id: str = "",
                tier: dict[str, Any] | None = None, extra_args: list[str] | None = None,
                adapter: dict[str, Any] | None = None, metrics_host: str = LOOPBACK) -> list[str]:
    """`lmcache server` with fxctl's tier as its only L2 adapter.

    port: ZMQ request port (vLLM's lmcache.mp.port); l1_bytes: LMCache's DRAM L1 (whole MiB at least);
    l2_path / l2_bytes: the tier's directory and capacity; metrics_port: the tier's /metrics (0: none) on
    metrics_host;
    http_port: LMCache's HTTP API on `host` (/healthcheck, /status); chunk_size: tokens per chunk, as vLLM's
    side expects (256, LMCache's default); tier: further TierConfig fields for the adapter; adapter: another
    `--l2-adapter` spec instead of fxctl's (LMCache's own, lmcache_adapter_spec: a comparison anchor).
    """
    if l1_bytes < 1 << 20:
        raise ValueError("LMCache's MP server needs an L1 of at least 1 MiB (--l1-size-gb)")
    spec = adapter or adapter_spec(l2_path, l2_bytes, metrics_port, metrics_host, **(tier or {}))
    argv = [*lmcache_command(python_or_lmcache_bin), "server",
            "--host", host, "--port", str(port),
            "--http-host", host, "--http-port", str(http_port),
            "--chunk-size", str(chunk_size),
            "--l1-size-gb", str(l1_bytes / GIB), "--eviction-policy", eviction_policy,
            "--supported-transfer-mode", transfer_mode,
            "--l2-adapter", json.dumps(spec, separators=(",", ":"))]
    if instance_id:
        argv += ["--instance-id", instance_id]
    return argv + list(extra_args or [])


def server_environment() -> dict[str, str]:
    """Environment of the server process, on top of one where fxctl and LMCache import."""
    return {"LMCACHE_DISABLE_BANNER": "1", "PYTHONUNBUFFERED": "1"}


def http_url(http_port: int = 8080, host: str = LOOPBACK) -> str:
    return f"http://{host}:{http_port}"


def health_url(http_port: int = 8080, host: str = LOOPBACK) -> str:
    """LMCache's own health endpoint: 200 once the cache engine is up (503 before)."""
    return http_url(http_port, host) + "/healthcheck"


def ping_argv(python_or_lmcache_bin: str, http_port: int = 8080, host: str = LOOPBACK) -> list[str]:
    """LMCache's health check command (exit 0: healthy; 1: not, with the reason on stderr)."""
    return [*lmcache_command(python_or_lmcache_bin), "ping", "kvcache", "--url", http_url(http_port, host)]


def describe_argv(python_or_lmcache_bin: str, http_port: int = 8080, host: str = LOOPBACK,
                  output: str = "") -> list[str]:
    """`lmcache describe kvcache`: L1 capacity and use, cached objects, sessions, L2 health (from /status);
    with output, also written there as JSON."""
    argv = [*lmcache_command(python_or_lmcache_bin), "describe", "kvcache", "--url", http_url(http_port, host)]
    return argv + (["--format", "json", "--output", output] if output else [])


def metrics_url(metrics_port: int, host: str = LOOPBACK) -> str:
    """The adapter's Prometheus endpoint: fxctl_tier_* and LMCache's lmcache_mp_*."""
    return f"http://{host}:{metrics_port}/metrics"


def kv_transfer_config(port: int, host: str = LOOPBACK, kv_role: str = "kv_both",
                       extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """vLLM's --kv-transfer-config for LMCacheMPConnector talking to the server on host:port.
    extra: further lmcache.mp.* keys (mq_timeout, heartbeat_interval, eager_prefetch, save_decode_cache)."""
    config = {"lmcache.mp.host": f"tcp://{host}", "lmcache.mp.port": int(port), **(extra or {})}
    return {"kv_connector": CONNECTOR, "kv_role": kv_role, "kv_connector_extra_config": config}


def vllm_args(port: int, host: str = LOOPBACK, **kw: Any) -> list[str]:
    """The vLLM arguments that connect it to the server."""
    return ["--kv-transfer-config", json.dumps(kv_transfer_config(port, host, **kw), separators=(",", ":"))]
