"""TierStore on real files: round trips, prefix lookups, eviction, promotion, pins, checksums, restart."""

import logging
import os

import pytest
from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import PAGE_BYTES, TierStore
from fxctl.kvtier.buffers import aligned_buffer

SIZES = [1, 4095, 4097, PAGE_BYTES + 1, 300_000, (1 << 20) + 3]


def read(store, key, size, aligned=False):
    out = aligned_buffer(size) if aligned else bytearray(size)
    n = store.get_into([key], [out])[0]
    return None if n is None else bytes(out[:n])


@pytest.mark.parametrize("aligned", [False, True])
def test_round_trip_through_l1_and_l2_after_restart(disk_dir, aligned):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        for i, size in enumerate(SIZES):
            assert store.put(f"k{i}", chunk_bytes(f"k{i}", size))
        for i, size in enumerate(SIZES):
            assert read(store, f"k{i}", size, aligned) == chunk_bytes(f"k{i}", size)
    with TierStore(cfg) as store:
        assert store.stats()["recovery"]["chunks"] == len(SIZES)
        for i, size in enumerate(SIZES):
            assert read(store, f"k{i}", size, aligned) == chunk_bytes(f"k{i}", size)
        assert store.stats()["counters"]["l2_hits"] == len(SIZES)
        assert store.stats()["l2"]["direct_io"] is True


def test_contains_counts_the_stored_prefix_and_pins_it(disk_dir):
    with TierStore(small_config(disk_dir)) as store:
        for k in "abce":
            store.put(k, chunk_bytes(k, 5000))
        assert store.contains(["a", "b", "c", "d", "e"]) == 3
        assert store.contains(["d", "a"]) == 0
        assert store.contains([]) == 0
        assert store.contains(["a", "b"], pin=True) == 2
        assert store.stats()["pinned_chunks"] == 2
        assert store.unpin("a") and store.unpin("b") and not store.unpin("b")


def test_l1_evictions_are_demoted_to_l2(disk_dir):
    with TierStore(small_config(disk_dir, l1_bytes=1 << 20)) as store:
        for i in range(12):
            store.put(f"k{i}", chunk_bytes(f"k{i}", 256 << 10))
        store.flush()
        for i in range(12):
            assert read(store, f"k{i}", 256 << 10) == chunk_bytes(f"k{i}", 256 << 10)
        c = store.stats()["counters"]
        assert c["l1_evictions"] >= 8 and c["l2_hits"] >= 8 and c["l1_hits"] >= 1


def test_reused_prefix_stays_in_l1_through_a_scan(disk_dir):
    size = 128 << 10
    with TierStore(small_config(disk_dir, l1_bytes=1 << 20)) as store:
        for k in ("p0", "p1"):
            store.put(k, chunk_bytes(k, size))
            read(store, k, size)  # reused: moves to the protected segment
        for i in range(20):
            store.put(f"scan{i}", chunk_bytes(f"scan{i}", size))
        store.flush()
        before = store.stats()["counters"].get("l2_hits", 0)
        assert read(store, "p0", size) == chunk_bytes("p0", size)
        assert read(store, "p1", size) == chunk_bytes("p1", size)
        assert store.stats()["counters"].get("l2_hits", 0) == before


def test_a_chunk_hit_twice_in_l2_is_promoted_to_l1(disk_dir):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("k", chunk_bytes("k", 70_000))
    with TierStore(cfg) as store:
        for _ in range(3):
            assert read(store, "k", 70_000) == chunk_bytes("k", 70_000)
        c = store.stats()["counters"]
        assert (c["l2_hits"], c["l2_promotions"], c["l1_hits"]) == (2, 1, 1)


def test_remove_forgets_in_every_tier_and_after_restart(disk_dir):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("gone", chunk_bytes("gone", 9000))
        store.put("kept", chunk_bytes("kept", 9000))
        store.flush()
        assert store.remove("gone")
        assert not store.remove("never")
        assert store.contains(["gone"]) == 0
    with TierStore(cfg) as store:
        assert store.contains(["gone"]) == 0 and store.contains(["kept"]) == 1
        assert store.stats()["l2"]["used_bytes"] == PAGE_BYTES


def test_put_again_replaces_the_chunk(disk_dir):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("k", chunk_bytes("k", 5000, seed=1))
        store.put("k", chunk_bytes("k", 7000, seed=2))
        assert read(store, "k", 7000) == chunk_bytes("k", 7000, seed=2)
    with TierStore(cfg) as store:
        assert read(store, "k", 7000) == chunk_bytes("k", 7000, seed=2)
        assert store.stats()["l2"]["chunks"] == 1


def test_l2_evicts_least_recent_but_never_pinned(disk_dir):
    cfg = small_config(disk_dir, l1_bytes=0, l2_bytes=1 << 20, segment_bytes=1 << 20)
    with TierStore(cfg) as store:
        store.put("pinned", chunk_bytes("pinned", PAGE_BYTES))
        store.flush()
        assert store.pin("pinned")
        for i in range(40):
            store.put(f"k{i}", chunk_bytes(f"k{i}", PAGE_BYTES))
            store.flush()
        assert store.contains(["pinned"]) == 1
        assert store.contains(["k39"]) == 1 and store.contains(["k0"]) == 0
        assert store.stats()["counters"]["l2_evictions"] >= 24
        assert read(store, "pinned", PAGE_BYTES) == chunk_bytes("pinned", PAGE_BYTES)


def test_a_corrupt_chunk_is_a_miss_logged_and_dropped(disk_dir, caplog):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("bad", chunk_bytes("bad", 100_000))
        store.put("good", chunk_bytes("good", 100_000))
        store.flush()
        loc = store.l2.index["bad"].loc
    with open(os.path.join(disk_dir, f"segment.{loc.segment:05d}"), "r+b") as f:
        f.seek(loc.page * PAGE_BYTES + 5000)
        byte = f.read(1)
        f.seek(loc.page * PAGE_BYTES + 5000)
        f.write(bytes([byte[0] ^ 1]))
    with TierStore(cfg) as store, caplog.at_level(logging.ERROR):
        assert read(store, "bad", 100_000) is None
        assert "checksum mismatch" in caplog.text
        assert store.stats()["counters"]["l2_checksum_failures"] == 1
        assert store.contains(["bad"]) == 0
        assert read(store, "good", 100_000) == chunk_bytes("good", 100_000)
    with TierStore(cfg) as store:
        assert store.contains(["bad"]) == 0 and store.stats()["l2"]["used_bytes"] == 2 * PAGE_BYTES


def test_borrowed_buffers_are_released_once_written(disk_dir):
    released = []
    buf = aligned_buffer(8192)
    buf[:] = chunk_bytes("b", 8192)
    with TierStore(small_config(disk_dir)) as store:
        store.put("b", buf, release=lambda: released.append(1))
        store.flush()
        assert released == [1]
        assert read(store, "b", 8192) == chunk_bytes("b", 8192)
        # a buffer that cannot be written as is gets copied and released at once
        store.put("c", bytearray(chunk_bytes("c", 100)), release=lambda: released.append(2))
        assert released == [1, 2]


def test_a_too_small_destination_is_a_miss_not_an_error(disk_dir):
    with TierStore(small_config(disk_dir)) as store:
        store.put("k", chunk_bytes("k", 10_000))
        store.flush()
        assert store.get_into(["k", "nothing"], [bytearray(9_999), bytearray(10)]) == [None, None]


def test_without_o_direct_l2_falls_back_to_the_page_cache_with_a_warning(ramfs_dir, caplog):
    cfg = small_config(ramfs_dir, l2_bytes=8 << 20, segment_bytes=4 << 20)
    with caplog.at_level(logging.WARNING):
        store = TierStore(cfg)
    assert "does not support O_DIRECT" in caplog.text
    with store:
        store.put("k", chunk_bytes("k", 123_456))
    with TierStore(cfg) as store:
        assert store.stats()["l2"]["direct_io"] is False
        assert read(store, "k", 123_456) == chunk_bytes("k", 123_456)


def test_stats_has_the_fields_serve_and_tune_read(disk_dir):
    with TierStore(small_config(disk_dir)) as store:
        store.put("k", chunk_bytes("k", 1000))
        read(store, "k", 1000)
        s = store.stats()
    assert {"l1", "l2", "write_behind", "counters", "latency", "recovery"} <= set(s)
    assert s["latency"]["get_l1"]["count"] == 1 and s["latency"]["put"]["count"] == 1
    assert s["l1"]["budget_bytes"] == 1 << 20


def test_direct_io_can_be_turned_off(disk_dir):
    cfg = small_config(disk_dir, direct_io=False)
    with TierStore(cfg) as store:
        store.put("k", chunk_bytes("k", 4321))
        assert store.stats()["l2"]["direct_io"] is False
    with TierStore(cfg) as store:
        assert read(store, "k", 4321) == chunk_bytes("k", 4321)


def test_one_directory_one_store(disk_dir):
    with TierStore(small_config(disk_dir)):
        with pytest.raises(RuntimeError, match="in use by another store"):
            TierStore(small_config(disk_dir))
    TierStore(small_config(disk_dir)).close()


def test_clear_removes_everything(disk_dir):
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        for i in range(5):
            store.put(f"k{i}", chunk_bytes(f"k{i}", 3000))
        store.flush()
        assert store.clear() == 5
        assert store.contains(["k0"]) == 0
    with TierStore(cfg) as store:
        assert store.stats()["l2"]["chunks"] == 0 and store.stats()["l2"]["used_bytes"] == 0


def test_a_reader_without_xxhash_misses_but_keeps_the_chunks(disk_dir, tmp_path):
    import subprocess
    import sys

    from fxctl.kvtier.checksum import XXH3, default_algorithm

    if default_algorithm() != XXH3:
        pytest.skip("xxhash is not installed here")
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        store.put("k", chunk_bytes("k", 50_000))
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "xxhash.py").write_text("raise ImportError('hidden')\n")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "from fxctl.kvtier import TierConfig, TierStore\n"
            "s = TierStore(TierConfig(l2_path=sys.argv[3], l1_bytes=0, l2_bytes=64 << 20, segment_bytes=16 << 20))\n"
            "print(s.get_into(['k'], [bytearray(50_000)])[0], s.stats()['counters'].get('l2_unverifiable'))\n"
            "s.close()\n")
    out = subprocess.run([sys.executable, "-c", code, str(hide), repo, disk_dir], capture_output=True, text=True)
    assert out.stdout.split() == ["None", "1"], out.stderr
    with TierStore(cfg) as store:
        assert read(store, "k", 50_000) == chunk_bytes("k", 50_000)
