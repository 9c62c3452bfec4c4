"""The adapter inside the real LMCache (0.5.x) StorageManager on the CPU: loaded from the rendered config,
round trips of real MemoryObjs, chunks evicted from LocalCPUBackend served by fxtier, and a restart."""

import os

import pytest
import yaml
from kvtier_helpers import free_port, sample, scrape

pytestmark = pytest.mark.lmcache

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache.v1.storage_backend.storage_manager")

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig, load_engine_config_with_overrides  # noqa: E402
from lmcache.v1.event_manager import EventManager  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.storage_backend.storage_manager import StorageManager  # noqa: E402

from fxctl.integrations.lmcache.config import lmcache_environment, render_lmcache_config  # noqa: E402
from fxctl.integrations.lmcache.storage_plugin import FxTierBackend  # noqa: E402

LAYERS, HEADS, HEAD_DIM, TOKENS = 4, 2, 32, 256
SHAPE = torch.Size([2, LAYERS, TOKENS, HEADS * HEAD_DIM])  # 128 KiB in bf16
CHUNK_BYTES = SHAPE.numel() * 2


def make_manager(l2_path, cpu_chunks=12, config_file=None, metrics_port=0):
    """A StorageManager for the rendered config: from the dict, or (config_file) from the YAML file named
    by LMCACHE_CONFIG_FILE, as the vLLM connector loads it."""
    config = render_lmcache_config(l2_path=l2_path, l2_bytes=256 << 20, segment_bytes=64 << 20,
                                   cpu_bytes=cpu_chunks * CHUNK_BYTES, io_threads=4, metrics_port=metrics_port)
    if config_file is None:
        engine_config = LMCacheEngineConfig.from_dict(config)
    else:
        with open(config_file, "w") as f:
            yaml.safe_dump(config, f)
        assert os.environ["LMCACHE_CONFIG_FILE"] == str(config_file)
        engine_config = load_engine_config_with_overrides()
    metadata = LMCacheMetadata(model_name="m", world_size=1, local_world_size=1, worker_id=0, local_worker_id=0,
                               kv_dtype=torch.bfloat16, kv_shape=(LAYERS, 2, TOKENS, HEADS, HEAD_DIM), role="worker")
    return StorageManager(engine_config, metadata, event_manager=EventManager())


def key(i):
    return CacheEngineKey("m", 1, 0, 1000 + i, torch.bfloat16)


def put_chunks(manager, ids):
    for i in ids:
        obj = manager.allocate(SHAPE, torch.bfloat16, MemoryFormat.KV_2LTD)
        obj.tensor.copy_(expected(i))
        manager.batched_put([key(i)], [obj])


def expected(i):
    g = torch.Generator().manual_seed(i)
    return torch.randn(SHAPE, generator=g).to(torch.bfloat16)


def retrieve(manager, ids):
    """As LMCache's engine does: map the prefix to tiers, then get from each tier; {id: (tier, tensor)}."""
    mapping = manager.get_block_mapping([(key(i), 0, TOKENS) for i in ids])
    got = {}
    for location, infos in mapping.items():
        objs = manager.batched_get([k for k, _b, _e in infos], location=location)
        for (k, _b, _e), obj in zip(infos, objs):
            if obj is not None:
                got[k.chunk_hash - 1000] = (location, obj.tensor.clone())
                obj.ref_count_down()
    return got


@pytest.fixture
def l2_path(tmp_path):
    return str(tmp_path / "fxtier")


def test_plugin_loads_from_the_rendered_config_and_round_trips(l2_path):
    manager = make_manager(l2_path)
    try:
        plugin = manager.storage_backends.get("fxtier")
        assert isinstance(plugin, FxTierBackend)
        put_chunks(manager, range(4))
        plugin.store.flush()
        objs = plugin.batched_get_blocking([key(i) for i in range(4)] + [key(99)])
        assert objs[4] is None
        for i, obj in enumerate(objs[:4]):
            assert obj.get_shape() == SHAPE and obj.get_dtype() == torch.bfloat16
            assert torch.equal(obj.tensor, expected(i))
            obj.ref_count_down()
        assert plugin.stats()["counters"]["l2_bytes_written"] == 4 * CHUNK_BYTES
        assert plugin.batched_contains([key(0), key(1), key(99), key(2)]) == 2
    finally:
        manager.close()


def test_chunks_evicted_from_local_cpu_are_served_by_fxtier(l2_path):
    manager = make_manager(l2_path, cpu_chunks=8)
    try:
        plugin = manager.storage_backends["fxtier"]
        put_chunks(manager, range(24))
        plugin.store.flush()
        cpu = manager.storage_backends["LocalCPUBackend"]
        evicted = [i for i in range(24) if not cpu.contains(key(i))]
        assert len(evicted) >= 12
        got = {}
        for start in range(0, 24, 4):  # restore in batches that fit the CPU pool
            got.update(retrieve(manager, range(start, start + 4)))
        assert sorted(got) == list(range(24))
        assert {got[i][0] for i in evicted} == {"fxtier"}
        for i, (_tier, tensor) in got.items():
            assert torch.equal(tensor, expected(i))
        assert plugin.stats()["counters"]["l2_hits"] >= len(evicted)
    finally:
        manager.close()


def test_a_restarted_lmcache_finds_and_serves_the_chunks(l2_path, tmp_path, monkeypatch):
    config_file = tmp_path / "lmcache.yaml"
    for name, value in lmcache_environment(str(config_file)).items():
        monkeypatch.setenv(name, value)
    manager = make_manager(l2_path, config_file=config_file)
    put_chunks(manager, range(10))
    manager.storage_backends["fxtier"].store.flush()
    manager.close()

    manager = make_manager(l2_path, config_file=config_file)
    try:
        plugin = manager.storage_backends["fxtier"]
        assert plugin.stats()["recovery"]["chunks"] == 10
        got = {}
        for start in (0, 5):
            got.update(retrieve(manager, range(start, start + 5)))
        assert sorted(got) == list(range(10))
        assert {tier for tier, _t in got.values()} == {"fxtier"}
        assert all(torch.equal(t, expected(i)) for i, (_tier, t) in got.items())
    finally:
        manager.close()


def test_rendered_config_keeps_chunk_hashes_stable():
    config = render_lmcache_config(l2_path="/mnt/kv", l2_bytes=1 << 40, cpu_bytes=8 << 30)
    assert config["pre_caching_hash_algorithm"] == "sha256_cbor"
    parsed = LMCacheEngineConfig.from_dict(config)
    assert parsed.storage_plugins == ["fxtier"]
    assert parsed.extra_config["storage_plugin.fxtier.module_path"] == "fxctl.integrations.lmcache.storage_plugin"
    assert parsed.extra_config["fxtier.l2_path"] == "/mnt/kv"


def test_the_plugin_serves_the_tiers_metrics_on_its_port(l2_path):
    port = free_port()
    manager = make_manager(l2_path, metrics_port=port)
    try:
        plugin = manager.storage_backends["fxtier"]
        put_chunks(manager, range(3))
        plugin.store.flush()
        found = scrape(port)  # worker 0: metrics_port + 0
        assert sample(found, "fxctl_tier_stored_chunks_total", tier="l2") == 3
        assert sample(found, "fxctl_tier_write_bytes_total", tier="l2") == 3 * CHUNK_BYTES
        assert sample(found, "fxctl_tier_chunks", tier="l2") == 3
    finally:
        manager.close()
    with pytest.raises(OSError):
        scrape(port)
