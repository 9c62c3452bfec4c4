"""Which LMCache path a deployment uses, and the `lmcache server` unit of the multi-process (MP) path.

LMCache's supported direction is MP mode: a separate `lmcache server` process holds the DRAM pool (L1)
and its L2 adapters, and vLLM connects to it with `LMCacheMPConnector`. fxctl's tier is that server's
`plugin` L2 adapter (fxctl.integrations.lmcache.l2_adapter.FxTierL2Adapter). One server per serving host and
deployment, shared by the deployment's instances on that host: one DRAM pool and one L2 index per host,
so instances that serve the same model share prefixes, and one process owns the tier's directory (the
tier store takes a lock on it). MP serves GPU hosts and CPU hosts alike: on a CPU host the server takes
LMCache's engine-driven copy path (`--supported-transfer-mode auto`; fxctl.integrations.lmcache.server).

The in-process path (`LMCacheConnectorV1` + the `fxtier` storage plugin, marked deprecated by LMCache)
stays only where MP cannot serve:
- `--offload lmcache-disk`: LMCache's own LocalDiskBackend, kept as a comparison anchor, exists only there;
- `--lmcache-mode in-process`: an operator who keeps a warm in-process tier while migrating (its chunk
  keys differ from MP mode's, so an MP server does not read it: see `migration_note`).
On a CPU host the in-process path runs with fxctl's CPU connector (fxctl.integrations.vllm.cpu_connector):
LMCache 0.5.6 has none for vLLM's CPU cache there.
"""

from __future__ import annotations

import json

from fxctl.errors import BadInput
from fxctl.integrations.lmcache import server as lmcache_server
from fxctl.kvtier.admission import DEFAULT_ADMISSION

MODES = ("mp", "in-process")
# ports of a deployment's LMCache server, from the first vLLM port P: ZMQ P+500, HTTP P+501, tier metrics P+502
MP_PORT_OFFSET, HTTP_PORT_OFFSET, METRICS_PORT_OFFSET = 500, 501, 502


def lmcache_mode(settings) -> str | None:
    """'mp', 'in-process', or None (no offload, or the emulator)."""
    if settings.engine != "vllm" or settings.offload == "none":
        return None
    if settings.offload == "lmcache-disk":
        return "in-process"
    if settings.offload in LMCACHE_ADAPTER_OF:
        return "mp"      # the adapters of LMCache's MP server exist only there
    return settings.lmcache_mode or "mp"


def why_in_process(settings) -> str:
    if settings.offload == "lmcache-disk":
        return "LMCache's own LocalDiskBackend (a comparison anchor) exists only in-process"
    return "--lmcache-mode in-process (LMCache marks this path deprecated)"


def mp_ports(settings) -> tuple[int, int, int]:
    return (settings.port + MP_PORT_OFFSET, settings.port + HTTP_PORT_OFFSET, settings.port + METRICS_PORT_OFFSET)


def mp_kv_transfer_config(settings) -> str:
    """vLLM's --kv-transfer-config for LMCacheMPConnector pointed at the host's server."""
    return json.dumps(lmcache_server.kv_transfer_config(mp_ports(settings)[0]), separators=(",", ":"))


# --offload -> LMCache's own MP adapter (a comparison anchor) in place of fxctl's tier
LMCACHE_ADAPTER_OF = {"lmcache-fs-native": "fs_native", "lmcache-fs": "fs", "lmcache-raw-block": "raw_block"}


def server_argv(settings, l2_path: str) -> tuple[str, ...]:
    """`lmcache server` with fxctl's tier (or, --offload lmcache-*, one of LMCache's own persistent adapters)
    as its L2 adapter and the host's L1 as its DRAM pool."""
    mp_port, http_port, metrics_port = mp_ports(settings)
    return tuple(lmcache_server.server_argv(
        settings.python, mp_port, settings.l1_bytes_per_host, l2_path,
        settings.l2_bytes_per_host, metrics_port if tier_metrics_port(settings) else 0, http_port=http_port,
        chunk_size=settings.chunk_size, tier=tier_params(settings), adapter=lmcache_adapter(settings, l2_path),
        metrics_host=settings.metrics_address))


def lmcache_adapter(settings, l2_path: str) -> dict | None:
    """LMCache's own adapter's spec where --offload asks for one; None: fxctl's tier."""
    kind = LMCACHE_ADAPTER_OF.get(settings.offload)
    if kind is None:
        return None
    return lmcache_server.lmcache_adapter_spec(kind, l2_path, settings.l2_bytes_per_host,
                                               raw_block_slot(settings) if kind == "raw_block" else 0)


def raw_block_slot(settings) -> int:
    """raw_block's slot: its header and one chunk of the profile's model on one rank, in whole 4 KiB pages."""
    if settings.kv_chunk_bytes <= 0:
        raise BadInput("--offload lmcache-raw-block needs the model's KV size per chunk",
                       "use a profile whose model section gives layers, kv_heads, head_dim and kv_dtype_bytes")
    return -(-(settings.kv_chunk_bytes + lmcache_server.RAW_BLOCK_HEADER) // 4096) * 4096


def device_file(settings, l2_path: str) -> tuple[str, int] | None:
    """raw_block's device: a file of its metadata region plus its slots, made before the server starts."""
    spec = lmcache_adapter(settings, l2_path)
    if not spec or spec["type"] != "raw_block":
        return None
    return spec["device_path"], spec["capacity_bytes"]


def tier_metrics_port(settings) -> bool:
    """Whether the server exports fxctl's tier metrics (LMCache's own adapters export none: `lmcache server`
    serves no /metrics)."""
    return settings.offload not in LMCACHE_ADAPTER_OF


def tier_params(settings) -> dict:
    """The adapter's TierConfig fields beyond the sizes: the served model (its KV is keyed under the
    weights' fingerprint, so another model's never comes back) and a non-default admission policy."""
    params = {"model": settings.model}
    if settings.l2_admission != DEFAULT_ADMISSION:
        params["l2_admission"] = settings.l2_admission
    return params


def server_environment() -> dict[str, str]:
    return lmcache_server.server_environment()


def migration_note(mode: str | None, in_process_dirs_with_data: list[str], mp_dir: str) -> str:
    """What an operator must know when the layout on disk and the mode deployed differ ('' when they don't)."""
    if mode == "mp" and in_process_dirs_with_data:
        return (f"in-process tier data in {', '.join(in_process_dirs_with_data)} is not read by the MP server "
                f"(its chunk keys differ; the MP tier lives in {mp_dir}): it stays on disk untouched. Keep serving "
                "it with --lmcache-mode in-process, or remove those folders to reclaim the space")
    return ""


def mode_line(settings) -> str:
    """One line for --dry-run and status: the LMCache path this deployment uses."""
    mode = lmcache_mode(settings)
    if mode == "mp":
        return ("# LMCache: multi-process mode (one `lmcache server` per host with fxctl's tier as its L2 adapter; "
                "vLLM connects with LMCacheMPConnector), started before vLLM and stopped after it")
    if mode == "in-process":
        return f"# LMCache: in-process (LMCacheConnectorV1 + storage plugin), because {why_in_process(settings)}"
    return "# no KV offload: vLLM recomputes what its own cache lost" if settings.engine == "vllm" else ""
