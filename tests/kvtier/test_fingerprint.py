"""One model's KV is never served to another (issue 28 #6): the tier keys chunks under the fingerprint of
the model's weights; the same path with other weights misses, counted, and the old chunks stay unserved."""

from __future__ import annotations

import json
import shutil

from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import TierStore
from fxctl.kvtier.fingerprint import SAMPLE_BYTES, SAMPLES, fingerprint


def make_model(folder, weights: bytes, config: dict | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or {"num_hidden_layers": 2, "hidden_size": 64}))
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def test_the_fingerprint_follows_the_weights_not_the_path(tmp_path):
    model = make_model(tmp_path / "m", b"\x01" * 100_000)
    same = fingerprint(str(model))
    assert len(same) == 16 and fingerprint(str(model)) == same
    assert fingerprint(str(shutil.copytree(model, tmp_path / "copy"))) == same   # a copy elsewhere: the same
    (model / "model.safetensors").write_bytes(b"\x02" * 100_000)                 # same path, same size
    assert fingerprint(str(model)) != same
    changed_config = make_model(tmp_path / "c", b"\x01" * 100_000, {"num_hidden_layers": 3, "hidden_size": 64})
    assert fingerprint(str(changed_config)) != same
    assert fingerprint("org/model-id") != fingerprint("org/other-id") and fingerprint("") == ""


def test_large_weight_files_are_sampled_and_a_changed_block_is_seen(tmp_path):
    size = SAMPLES * SAMPLE_BYTES * 4
    model = make_model(tmp_path / "big", bytes(size))
    before = fingerprint(str(model))
    step = (size - SAMPLE_BYTES) // (SAMPLES - 1)
    with open(model / "model.safetensors", "r+b") as handle:    # a byte inside the 10th sampled block
        handle.seek(10 * step + 5)
        handle.write(b"\xff")
    assert fingerprint(str(model)) != before


def test_other_weights_at_the_same_path_miss_and_are_counted(tmp_path):
    model = make_model(tmp_path / "model", b"\x01" * 4096)
    cfg = small_config(str(tmp_path / "l2"), l1_bytes=0, model=str(model))
    names = [f"m@0@{i:04x}@0" for i in range(4)]
    with TierStore(cfg) as store:
        for name in names:
            assert store.put(store.key(name), chunk_bytes(name, 64 << 10))
        assert store.flush(10)
        assert store.contains([store.key(n) for n in names]) == 4
    (model / "model.safetensors").write_bytes(b"\x02" * 4096)    # replaced in place: same path, same shapes
    with TierStore(cfg) as store:
        assert store.contains([store.key(n) for n in names]) == 0
        assert store.count_mismatches(names) == 4
        assert store.metrics.snapshot()["counters"]["model_mismatches"] == 4
        record = json.loads((tmp_path / "l2" / "model.json").read_text())
        assert record["fingerprint"] == store.namespace and record["chunks_of_other_weights"] == 4
        assert store.stats()["model"]["chunks_of_other_weights"] == 4
    (model / "model.safetensors").write_bytes(b"\x01" * 4096)    # the first weights back: their KV is found
    with TierStore(cfg) as store:
        assert store.contains([store.key(n) for n in names]) == 4
        assert store.count_mismatches(names) == 0
