"""The rendered LMCache config and environment (no LMCache needed)."""

import pytest

from fxctl.integrations.lmcache.config import lmcache_environment, render_lmcache_config, tier_config_from_extra


def test_rendered_config_names_the_plugin_and_its_tier():
    cfg = render_lmcache_config(l2_path="/mnt/kvcache", l2_bytes=2 << 40, cpu_bytes=64 << 30, io_threads=16)
    assert cfg["storage_plugins"] == ["fxtier"]
    assert cfg["local_cpu"] is True and cfg["max_local_cpu_size"] == 64
    extra = cfg["extra_config"]
    assert extra["storage_plugin.fxtier.class_name"] == "FxTierBackend"
    tier = tier_config_from_extra(extra)
    assert (tier.l2_path, tier.l2_bytes, tier.io_threads, tier.l1_bytes) == ("/mnt/kvcache", 2 << 40, 16, 0)


def test_hashes_are_stable_across_restarts():
    assert render_lmcache_config(l2_path="/x", l2_bytes=1, cpu_bytes=1 << 30)["pre_caching_hash_algorithm"] == \
        "sha256_cbor"
    assert lmcache_environment("/etc/fx/lmcache.yaml") == {"LMCACHE_CONFIG_FILE": "/etc/fx/lmcache.yaml",
                                                           "PYTHONHASHSEED": "0"}


def test_a_cpu_pool_is_required():
    with pytest.raises(ValueError, match="LocalCPUBackend"):
        render_lmcache_config(l2_path="/x", l2_bytes=1 << 30, cpu_bytes=0)
