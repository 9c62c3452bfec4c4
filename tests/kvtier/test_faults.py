"""Faults on L2: a full filesystem (ENOSPC) and a failing device (EIO) become misses and skipped writes,
counted and logged; nothing raises into the caller, and what was stored stays correct."""

import logging
import os

from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import TierStore

MIB = 1 << 20


def check_readable_or_missing(store, keys, size):
    """Every chunk reads back exactly or is a miss; returns how many read back."""
    found = 0
    for k in keys:
        out = bytearray(size)
        n = store.get_into([k], [out])[0]
        if n is not None:
            assert bytes(out) == chunk_bytes(k, size)
            found += 1
    return found


def fill_filesystem(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (MIB, 4096):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)


def test_enospc_on_a_small_filesystem(loop_fs, caplog):
    # the filesystem holds about 40 MiB; L2 is told it may use 1 GiB
    cfg = small_config(loop_fs.path, l1_bytes=0, l2_bytes=1 << 30, segment_bytes=8 * MIB, durable=True)
    keys = [f"k{i}" for i in range(60)]
    with caplog.at_level(logging.ERROR), TierStore(cfg) as store:
        for k in keys:
            store.put(k, chunk_bytes(k, MIB))
        assert store.flush(timeout=60)
        stats = store.stats()
        assert stats["counters"]["l2_enospc"] >= 1
        assert "cannot preallocate segment" in caplog.text
        found = check_readable_or_missing(store, keys, MIB)
        # the full segments were reused by evicting the oldest chunks: the newest are there
        assert found >= 16 and store.contains(keys[-8:]) == 8
    with TierStore(cfg) as store:
        assert check_readable_or_missing(store, keys, MIB) == found


def test_enospc_in_the_journal_skips_the_write(loop_fs):
    cfg = small_config(loop_fs.path, l1_bytes=0, l2_bytes=8 * MIB, segment_bytes=8 * MIB, durable=True)
    with TierStore(cfg) as store:
        store.put("before", chunk_bytes("before", MIB))
        assert store.flush(timeout=30)
        # fill what is left of the filesystem, so the journal cannot grow by another block
        fill_filesystem(os.path.join(loop_fs.mountpoint, "filler"))
        for i in range(200):  # enough records to need a new journal block
            assert store.put(f"after{i}", chunk_bytes(f"after{i}", 4096)) in (True, False)
        assert store.flush(timeout=30)
        counters = store.stats()["counters"]
        assert counters.get("l2_enospc", 0) + counters.get("l2_write_errors", 0) >= 1
        assert counters["l2_skipped_writes"] >= 1
        assert check_readable_or_missing(store, ["before"], MIB) == 1
        os.unlink(os.path.join(loop_fs.mountpoint, "filler"))
    with TierStore(cfg) as store:
        assert check_readable_or_missing(store, ["before"], MIB) == 1


def test_enospc_on_a_size_limited_tmpfs(tmpfs_dir):
    cfg = small_config(tmpfs_dir, l1_bytes=2 * MIB, l2_bytes=1 << 30, segment_bytes=8 * MIB)
    keys = [f"k{i}" for i in range(48)]
    with TierStore(cfg) as store:
        for k in keys:
            assert store.put(k, chunk_bytes(k, MIB))
        assert store.flush(timeout=60)
        assert store.stats()["counters"]["l2_enospc"] >= 1
        assert check_readable_or_missing(store, keys, MIB) >= 16


def test_eio_reads_are_misses_and_writes_are_skipped(loop_fs, caplog):
    cfg = small_config(loop_fs.path, l1_bytes=0, l2_bytes=16 * MIB, segment_bytes=16 * MIB, durable=True)
    keys = [f"k{i}" for i in range(6)]
    with TierStore(cfg) as store:
        for k in keys:
            store.put(k, chunk_bytes(k, 256 << 10))
    store = TierStore(cfg)
    assert store.contains(keys) == 6
    loop_fs.break_device()
    with caplog.at_level(logging.ERROR):
        outs = [bytearray(256 << 10) for _ in keys]
        assert store.get_into(keys, outs) == [None] * 6
        store.put("new", chunk_bytes("new", 256 << 10))
        assert store.flush(timeout=30)
        assert store.contains(["new"]) == 0
        store.close()
    counters = store.stats()["counters"]
    assert counters["l2_read_errors"] == 6 and counters["l2_misses"] == 6
    assert counters["l2_write_errors"] >= 1 and counters["l2_skipped_writes"] >= 1
    assert "Input/output error" in caplog.text
