"""The tier's Prometheus metrics: each store its own registry, per-tier families read back with
prometheus_client's own parser, L2 errors by kind, capacity gauges, and the HTTP endpoint on 127.0.0.1."""

import os

from kvtier_helpers import chunk_bytes, free_port, parse_samples, scrape, small_config
from kvtier_helpers import sample as value
from prometheus_client import generate_latest

from fxctl.kvtier import PAGE_BYTES, TierStore
from fxctl.kvtier.metrics import serve_metrics, tier_summary


def test_two_stores_count_apart_per_tier_with_capacity(disk_dir, tmp_path):
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    with TierStore(small_config(disk_dir)) as store, TierStore(small_config(str(other_dir))) as other:
        store.put("a", chunk_bytes("a", 5000))
        store.flush()
        out = bytearray(5000)
        assert store.get_into(["a", "missing"], [out, bytearray(10)]) == [5000, None]
        found = parse_samples(generate_latest(store.registry).decode())
        assert value(found, "fxctl_tier_hits_total", tier="l1") == 1
        assert value(found, "fxctl_tier_misses_total", tier="l1") == 1
        assert value(found, "fxctl_tier_misses_total", tier="l2") == 1
        assert value(found, "fxctl_tier_read_bytes_total", tier="l1") == 5000
        assert value(found, "fxctl_tier_write_bytes_total", tier="l2") == 5000
        assert value(found, "fxctl_tier_stored_chunks_total", tier="l2") == 1
        assert value(found, "fxctl_tier_read_latency_seconds_count", tier="l1") == 1
        assert value(found, "fxctl_tier_chunks", tier="l2") == 1
        assert value(found, "fxctl_tier_usage_bytes", tier="l2") == PAGE_BYTES
        assert value(found, "fxctl_tier_max_capacity_bytes", tier="l1") == 1 << 20
        assert value(found, "fxctl_tier_max_capacity_bytes", tier="l2") == store.stats()["l2"]["capacity_bytes"]
        # the other store's registry saw none of it
        assert value(parse_samples(generate_latest(other.registry).decode()), "fxctl_tier_hits_total", tier="l1") == 0


def test_l2_errors_by_kind_and_the_stats_dict_agree(disk_dir):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("bad", chunk_bytes("bad", 100_000))
        store.flush()
        loc = store.l2.index["bad"].loc
    with open(os.path.join(disk_dir, f"segment.{loc.segment:05d}"), "r+b") as f:
        f.seek(loc.page * PAGE_BYTES + 10)
        byte = f.read(1)
        f.seek(loc.page * PAGE_BYTES + 10)
        f.write(bytes([byte[0] ^ 1]))
    with TierStore(cfg) as store:
        assert store.get_into(["bad"], [bytearray(100_000)]) == [None]
        found = parse_samples(generate_latest(store.registry).decode())
        assert value(found, "fxctl_tier_errors_total", tier="l2", kind="checksum") == 1
        assert value(found, "fxctl_tier_errors_total", tier="l2", kind="read") == 0
        assert store.stats()["counters"]["l2_checksum_failures"] == 1


def test_an_unknown_event_is_counted_not_lost(disk_dir):
    with TierStore(small_config(disk_dir)) as store:
        store.metrics.add("l2_something_new", 3)
        assert store.stats()["counters"]["l2_something_new"] == 3
        assert value(parse_samples(generate_latest(store.registry).decode()), "fxctl_tier_events_total",
                     event="l2_something_new") == 3


def test_the_endpoint_serves_on_loopback_and_stops(disk_dir):
    assert serve_metrics(0) is None and serve_metrics(None) is None
    with TierStore(small_config(disk_dir)) as store:
        store.put("a", chunk_bytes("a", 1000))
        server = serve_metrics(free_port(), store.registry)
        try:
            assert server.host == "127.0.0.1"
            assert value(scrape(server.port), "fxctl_tier_puts_total") == 1
        finally:
            server.close()


def test_tier_summary_of_a_scrape(disk_dir):
    with TierStore(small_config(disk_dir)) as store:
        store.put("a", chunk_bytes("a", 5000))
        store.get_into(["a", "b"], [bytearray(5000), bytearray(10)])
        store.flush()
        summary = tier_summary(generate_latest(store.registry).decode())
    assert summary["l1"]["hits"] == 1 and summary["l1"]["misses"] == 1 and summary["l1"]["hit_rate"] == 0.5
    assert summary["l1"]["max_capacity_bytes"] == 1 << 20 and summary["l1"]["mean_read_s"] > 0
    assert summary["l2"]["hit_rate"] == 0.0 and summary["l2"]["errors"] == 0
    assert summary["l2"]["chunks"] == 1 and summary["l2"]["mean_read_s"] is None
