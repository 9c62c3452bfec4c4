"""The LMCache configuration that installs fxctl's tier as a storage plugin (no LMCache import needed).

Chunk hashes must be the same after a restart or nothing persisted is ever found again. LMCache 0.5.6
hashes token chunks with vLLM's function named by `pre_caching_hash_algorithm` (sha256_cbor: stable by
construction) and falls back to Python's builtin hash() when vLLM is not importable, which is stable only
with PYTHONHASHSEED fixed: the rendered config sets the first and `lmcache_environment` the second.
"""

from __future__ import annotations

from typing import Any

from fxctl.kvtier.admission import DEFAULT_ADMISSION
from fxctl.kvtier.config import CHUNK_TOKENS, GIB, IO_THREADS, TierConfig

PLUGIN_NAME = "fxtier"
MODULE_PATH = "fxctl.integrations.lmcache.storage_plugin"
CLASS_NAME = "FxTierBackend"
EXTRA_PREFIX = "fxtier."  # extra_config keys read by the plugin: fxtier.<TierConfig field>, fxtier.metrics_port


def render_lmcache_config(*, l2_path: str, l2_bytes: int, cpu_bytes: int, l1_bytes: int = 0,
                          chunk_size: int = CHUNK_TOKENS, io_threads: int = IO_THREADS, durable: bool = True,
                          segment_bytes: int = GIB, hash_algorithm: str = "sha256_cbor", metrics_port: int = 0,
                          l2_admission: str = DEFAULT_ADMISSION, model: str = "",
                          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """LMCache's YAML config (as a dict) for one serving instance.

    cpu_bytes: LMCache's LocalCPUBackend pool, the DRAM tier in front (plugins stage through it);
    l2_path / l2_bytes: fxctl's L2 on the XFS mount (each worker uses l2_path/rank<i>of<n>);
    l1_bytes: an extra DRAM pool inside fxctl's tier (0: LocalCPUBackend already is the DRAM tier);
    metrics_port: the tier's Prometheus metrics on 127.0.0.1:<metrics_port + worker id> (0: none);
    model: the served model (folder or id): the tier keys its chunks under its fingerprint.
    """
    if cpu_bytes <= 0:
        raise ValueError("cpu_bytes must be > 0: LMCache plugins stage through LocalCPUBackend")
    tier = TierConfig(l2_path=l2_path, l1_bytes=l1_bytes, l2_bytes=l2_bytes, io_threads=io_threads,
                      durable=durable, segment_bytes=segment_bytes, l2_admission=l2_admission)
    extra_config: dict[str, Any] = {
        f"storage_plugin.{PLUGIN_NAME}.module_path": MODULE_PATH,
        f"storage_plugin.{PLUGIN_NAME}.class_name": CLASS_NAME,
    }
    for name in ("l2_path", "l1_bytes", "l2_bytes", "segment_bytes", "io_threads", "durable"):
        extra_config[EXTRA_PREFIX + name] = getattr(tier, name)
    if tier.l2_admission != DEFAULT_ADMISSION:
        extra_config[EXTRA_PREFIX + "l2_admission"] = tier.l2_admission
    if metrics_port:
        extra_config[EXTRA_PREFIX + "metrics_port"] = metrics_port
    if model:
        extra_config[EXTRA_PREFIX + "model"] = model
    extra_config.update(extra or {})
    return {
        "chunk_size": chunk_size,
        "local_cpu": True,
        "max_local_cpu_size": round(cpu_bytes / GIB, 3),
        "pre_caching_hash_algorithm": hash_algorithm,
        "storage_plugins": [PLUGIN_NAME],
        "extra_config": extra_config,
    }


def lmcache_environment(config_file: str) -> dict[str, str]:
    """Environment for the serving process: the config file, and hash() fixed across restarts."""
    return {"LMCACHE_CONFIG_FILE": config_file, "PYTHONHASHSEED": "0"}


def tier_config_from_extra(extra_config: dict[str, Any] | None) -> TierConfig:
    """The TierConfig the plugin builds from LMCache's extra_config (keys fxtier.<field>)."""
    values = {k[len(EXTRA_PREFIX):]: v for k, v in (extra_config or {}).items() if k.startswith(EXTRA_PREFIX)}
    values.setdefault("l1_bytes", 0)
    # a put runs in the serving engine's thread: when the write-behind queue is full, skip L2 rather than wait
    values.setdefault("put_wait_s", 0.05)
    return TierConfig.from_mapping(values)
