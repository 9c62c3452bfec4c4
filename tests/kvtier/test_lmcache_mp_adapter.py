"""The L2 adapter for LMCache's multi-process mode, created by LMCache's own plugin factory: store, then
lookup-and-lock, load into caller-owned MemoryObjs, unlock; and the chunks are there after a restart."""

import select

import pytest
from kvtier_helpers import free_port, sample, scrape

pytestmark = pytest.mark.lmcache

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache.v1.distributed.l2_adapters.plugin_l2_adapter")

from lmcache.v1.distributed.api import ObjectKey  # noqa: E402
from lmcache.v1.distributed.l2_adapters.factory import create_l2_adapter_from_registry  # noqa: E402
from lmcache.v1.distributed.l2_adapters.plugin_l2_adapter import PluginL2AdapterConfig  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat, MemoryObjMetadata, TensorMemoryObj  # noqa: E402

SHAPE = torch.Size([2, 4, 256, 64])


def memory_obj(tensor):
    meta = MemoryObjMetadata(shape=SHAPE, dtype=torch.bfloat16, address=0, phy_size=tensor.numel() * 2,
                             ref_count=1, fmt=MemoryFormat.KV_2LTD)
    return TensorMemoryObj(raw_data=tensor.view(torch.uint8).flatten(), metadata=meta, parent_allocator=None)


def make_adapter(path, **params):
    config = PluginL2AdapterConfig.from_dict({
        "module_path": "fxctl.integrations.lmcache.l2_adapter", "class_name": "FxTierL2Adapter",
        "adapter_params": {"l2_path": path, "l2_bytes": 64 << 20, "segment_bytes": 16 << 20, **params}})
    return create_l2_adapter_from_registry(config)


def wait(fd):
    assert select.select([fd], [], [], 10)[0], "no completion signalled"


def key(i):
    return ObjectKey(chunk_hash=i.to_bytes(8, "big"), model_name="m", kv_rank=0)


def test_store_lookup_load_unlock_and_restart(tmp_path):
    path = str(tmp_path / "l2")
    data = [torch.randn(SHAPE).to(torch.bfloat16) for _ in range(3)]
    adapter = make_adapter(path)
    task = adapter.submit_store_task([key(i) for i in range(3)], [memory_obj(t.clone()) for t in data])
    wait(adapter.get_store_event_fd())
    result = adapter.pop_completed_store_tasks()[task]
    assert result.is_successful() and result.bytes_transferred() == 3 * data[0].numel() * 2
    adapter.close()

    adapter = make_adapter(path)
    try:
        task = adapter.submit_lookup_and_lock_task([key(0), key(7), key(2)], {})
        wait(adapter.get_lookup_and_lock_event_fd())
        assert sorted(adapter.query_lookup_and_lock_result(task).get_indices_list()) == [0, 2]
        outs = [memory_obj(torch.zeros(SHAPE, dtype=torch.bfloat16)) for _ in range(2)]
        task = adapter.submit_load_task([key(0), key(2)], outs)
        wait(adapter.get_load_event_fd())
        assert sorted(adapter.query_load_result(task).get_indices_list()) == [0, 1]
        assert torch.equal(outs[0].raw_data.view(torch.bfloat16).view(SHAPE), data[0])
        assert torch.equal(outs[1].raw_data.view(torch.bfloat16).view(SHAPE), data[2])
        adapter.submit_unlock([key(0), key(2)])
        assert adapter.store.stats()["pinned_chunks"] == 0
    finally:
        adapter.close()


def test_the_adapter_serves_the_tiers_metrics_on_metrics_port(tmp_path):
    port = free_port()
    adapter = make_adapter(str(tmp_path / "l2"), metrics_port=port)
    try:
        assert adapter.metrics_server.host == "127.0.0.1"
        data = torch.randn(SHAPE).to(torch.bfloat16)
        task = adapter.submit_store_task([key(1)], [memory_obj(data)])
        wait(adapter.get_store_event_fd())
        assert adapter.pop_completed_store_tasks()[task].is_successful()
        adapter.store.flush()
        found = scrape(port)
        assert sample(found, "fxctl_tier_stored_chunks_total", tier="l2") == 1
        assert sample(found, "fxctl_tier_write_bytes_total", tier="l2") == data.numel() * 2
    finally:
        adapter.close()
    with pytest.raises(OSError):
        scrape(port)
    quiet = make_adapter(str(tmp_path / "other"))  # no metrics_port: no endpoint
    try:
        assert quiet.metrics_server is None
    finally:
        quiet.close()
