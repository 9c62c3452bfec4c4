"""The LMCache config `fxctl serve` renders loads in the real LMCache (CPU) from the file its environment
names, and fxctl's tier plugin comes up (LMCache only logs plugin failures, so check it is there)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.lmcache
torch = pytest.importorskip("torch")
pytest.importorskip("lmcache.v1.storage_backend.storage_manager")

from lmcache.v1.config import load_engine_config_with_overrides  # noqa: E402
from lmcache.v1.event_manager import EventManager  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.storage_backend.storage_manager import StorageManager  # noqa: E402

from fxctl.integrations.lmcache.storage_plugin import FxTierBackend  # noqa: E402
from fxctl.serve.launch import LOADED_LINE  # noqa: E402
from fxctl.serve.render import plan_instances  # noqa: E402
from fxctl.serve.settings import settings_from  # noqa: E402
from fxctl.sim.profile import load_profile  # noqa: E402


def test_rendered_config_file_loads_and_the_plugin_comes_up(tmp_path, monkeypatch, caplog):
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp4x2"), l2_dir=str(tmp_path / "l2"),
                             lmcache_mode="in-process",
                             state_dir=str(tmp_path / "state"), l1_bytes=64 << 20, l2_bytes=512 << 20)
    plan = plan_instances(settings, "local")[1]
    Path(plan.config_path).parent.mkdir(parents=True)
    Path(plan.config_path).write_text(plan.lmcache_yaml())
    for name, value in plan.env.items():
        monkeypatch.setenv(name, value)
    assert os.environ["LMCACHE_CONFIG_FILE"] == plan.config_path
    config = load_engine_config_with_overrides()
    metadata = LMCacheMetadata(model_name="m", world_size=1, local_world_size=1, worker_id=0, local_worker_id=0,
                               kv_dtype=torch.bfloat16, kv_shape=(2, 2, 256, 1, 64), role="worker")
    caplog.set_level(logging.INFO)
    manager = StorageManager(config, metadata, event_manager=EventManager())
    try:
        plugin = manager.storage_backends.get("fxtier")
        assert isinstance(plugin, FxTierBackend), f"fxtier did not load: {list(manager.storage_backends)}"
        assert plugin.store.cfg.l2_path == f"{plan.data_dir}/rank0of1"
        assert plugin.store.cfg.l2_bytes == 256 << 20  # the per-host 512 MiB split over 2 instances
        # what `fxctl serve` greps the vLLM log for to confirm the tier loaded (LMCache's line or the plugin's)
        assert any(LOADED_LINE.search(r.getMessage()) for r in caplog.records)
    finally:
        manager.close()
