"""A damaged manifest is damage, not a crash: the store opens anyway (the serving engine must start), keeps the
records whose own checksums hold and what the journal adds, counts and logs the damage, and writes a whole
manifest again. Every chunk it serves still reads back exactly."""

import logging
import os

import pytest
from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import TierStore

SIZE = 64 << 10
KEYS = [f"k{i}" for i in range(20)]


def filled(disk_dir: str, journal_keys: list[str] = ()):
    """A closed store whose manifest holds KEYS (close checkpoints) and whose journal then holds journal_keys."""
    cfg = small_config(disk_dir)
    with TierStore(cfg) as store:
        for key in KEYS:
            assert store.put(key, chunk_bytes(key, SIZE))
    if journal_keys:
        store = TierStore(cfg)
        for key in journal_keys:
            assert store.put(key, chunk_bytes(key, SIZE))
        store.flush()
        store.l2.journal.close()  # as a crash would leave it: records in the journal, no new manifest
        store.l2.files.close()
        os.close(store.l2._lock_fd)
    return cfg


def damage(disk_dir: str, how: str) -> None:
    path = os.path.join(disk_dir, "manifest")
    data = bytearray(open(path, "rb").read())
    if how == "flip-body":
        data[len(data) // 2] ^= 0xFF
    elif how == "flip-magic":
        data[0] ^= 0xFF
    elif how == "truncate":
        data = data[:10]
    elif how == "garbage":
        data = bytearray(os.urandom(len(data)))
    open(path, "wb").write(bytes(data))


def readable(store, keys) -> list[str]:
    found = []
    for key in keys:
        out = bytearray(SIZE)
        if store.get_into([key], [out])[0] is not None:
            assert bytes(out) == chunk_bytes(key, SIZE), key
            found.append(key)
    return found


@pytest.mark.parametrize("how", ["flip-body", "flip-magic", "truncate", "garbage"])
def test_a_damaged_manifest_opens_counts_and_logs(disk_dir, how, caplog):
    cfg = filled(disk_dir, journal_keys=["j0", "j1"])
    damage(disk_dir, how)
    with caplog.at_level(logging.WARNING, logger="fxctl.kvtier"), TierStore(cfg) as store:
        stats = store.stats()
        assert stats["counters"]["l2_manifest_damaged"] == 1
        assert stats["recovery"]["manifest_damaged"]
        found = readable(store, KEYS + ["j0", "j1"])
        assert {"j0", "j1"} <= set(found)  # the journal's records are intact whatever the manifest
        if how == "flip-body":  # records before the damaged one have their own checksums: kept
            assert 0 < len(set(found) & set(KEYS)) < len(KEYS)
        assert store.put("new", chunk_bytes("new", SIZE))
    assert any("manifest" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    with TierStore(cfg) as store:  # the damage was repaired by a new whole manifest: no count on the next open
        assert store.stats()["counters"].get("l2_manifest_damaged", 0) == 0
        assert set(readable(store, KEYS + ["j0", "j1", "new"])) == set(found) | {"new"}


def test_an_unreadable_l2_directory_leaves_l1_working(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cfg = small_config(str(blocker / "l2"))
    with TierStore(cfg) as store:
        assert store.l2 is None
        assert store.stats()["counters"]["l2_open_failures"] == 1
        assert store.put("k", chunk_bytes("k", SIZE))
        assert readable(store, ["k"]) == ["k"]
