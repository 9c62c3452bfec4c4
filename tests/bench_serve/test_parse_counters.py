"""parse_counters reads Prometheus text with prometheus_client's parser: the real tier's registry and the
emulator's page give the same per-tier hit rates; a page that is not Prometheus text gives nothing."""

from prometheus_client import generate_latest

from fxctl.kvtier import TierConfig, TierStore
from fxctl.serve.replica_metrics import parse_counters, tier_hit_rates


def test_the_real_tiers_metrics_give_per_tier_hit_rates(tmp_path):
    cfg = TierConfig(l2_path=str(tmp_path), l1_bytes=1 << 20, l2_bytes=64 << 20, segment_bytes=16 << 20,
                     durable=False)
    with TierStore(cfg) as store:
        before = parse_counters(generate_latest(store.registry).decode())
        store.put("a", b"x" * 5000)
        store.get_into(["a", "b", "c"], [bytearray(5000), bytearray(10), bytearray(10)])
        after = parse_counters(generate_latest(store.registry).decode())
    rates = tier_hit_rates(before, after)
    assert rates["l1"] == {"hits": 1, "misses": 2, "hit_rate": 1 / 3}
    assert rates["l2"] == {"hits": 0, "misses": 2, "hit_rate": 0.0}
    assert after['fxctl_tier_errors_total{kind="read",tier="l2"}'] == 0


def test_labels_escaped_and_histograms_kept_and_junk_ignored():
    text = ('# TYPE vllm:prefix_cache_queries counter\n'
            'vllm:prefix_cache_queries_total{model_name="a \\"b\\"",engine="0"} 100\n'
            '# TYPE vllm:ttft histogram\n'
            'vllm:ttft_bucket{le="0.5"} 1\nvllm:ttft_bucket{le="+Inf"} 2\nvllm:ttft_sum 1.5\nvllm:ttft_count 2\n')
    found = parse_counters(text)
    assert found['vllm:prefix_cache_queries_total{model_name="a \\"b\\"",engine="0"}'] == 100
    assert found['vllm:ttft_bucket{le="+Inf"}'] == 2 and found["vllm:ttft_count"] == 2
    assert parse_counters("<html>not found</html>") == {}
