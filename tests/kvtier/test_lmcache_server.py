"""The MP server's command line, health checks and vLLM connector config, as values (no LMCache needed)."""

import json

import pytest

from fxctl.integrations.lmcache.server import (
    adapter_spec,
    health_url,
    kv_transfer_config,
    metrics_url,
    ping_argv,
    server_argv,
    vllm_args,
)


def test_server_argv_loads_fxctls_tier_as_the_plugin_l2_adapter():
    argv = server_argv("/env/bin/python", 5599, 1 << 30, "/mnt/kv/fxtier", 64 << 30, 9599, http_port=8599,
                       tier={"segment_bytes": 1 << 30})
    assert argv[:5] == ["/env/bin/python", "-P", "-m", "lmcache.cli.main", "server"]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags["--port"] == "5599" and flags["--host"] == "127.0.0.1"
    assert flags["--http-port"] == "8599" and flags["--http-host"] == "127.0.0.1"
    assert flags["--l1-size-gb"] == "1.0" and flags["--eviction-policy"] == "LRU"
    assert flags["--supported-transfer-mode"] == "auto"
    assert json.loads(flags["--l2-adapter"]) == {
        "type": "plugin", "module_path": "fxctl.integrations.lmcache.l2_adapter", "class_name": "FxTierL2Adapter",
        "adapter_params": {"l2_path": "/mnt/kv/fxtier", "l2_bytes": 64 << 30, "segment_bytes": 1 << 30,
                           "metrics_port": 9599}}


def test_the_lmcache_script_runs_as_is_and_no_metrics_port_means_no_endpoint():
    argv = server_argv("/usr/local/bin/lmcache", 5555, 256 << 20, "/kv", 1 << 30)
    assert argv[:2] == ["/usr/local/bin/lmcache", "server"]
    assert "--l1-size-gb" in argv and argv[argv.index("--l1-size-gb") + 1] == "0.25"
    assert "metrics_port" not in adapter_spec("/kv", 1 << 30)["adapter_params"]
    with pytest.raises(ValueError):
        server_argv("lmcache", 5555, 0, "/kv", 1 << 30)


def test_health_and_metrics_endpoints():
    assert health_url(8599) == "http://127.0.0.1:8599/healthcheck"
    assert ping_argv("lmcache", 8599) == ["lmcache", "ping", "kvcache", "--url", "http://127.0.0.1:8599"]
    assert metrics_url(9599) == "http://127.0.0.1:9599/metrics"


def test_vllm_connects_with_lmcache_mp_connector():
    assert kv_transfer_config(5599) == {
        "kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": 5599}}
    flag, value = vllm_args(5599, extra={"lmcache.mp.mq_timeout": 60})
    assert flag == "--kv-transfer-config"
    assert json.loads(value)["kv_connector_extra_config"]["lmcache.mp.mq_timeout"] == 60
