"""What identifies a model's weights, so that one model's KV is never served to another (issue 28 #6).

A tier keys its chunks under the fingerprint of the model it serves: a model folder (config.json plus its
weight files) hashes to the same 16 hex digits wherever it is copied, and to others when any file's
config, name, size or sampled content changes (the same path, the same shapes, other values: another
fingerprint). The content is sampled, not read whole (a 450 GB checkpoint would take minutes at every
start): 64 blocks of 64 KiB spread evenly over each weight file, the first and last included, so a
change confined to less than about 1/64 of a file can escape it; retraining or another checkpoint changes
every block. A model given as a hub id (no local folder) fingerprints its id: the weights are whatever
the hub serves under it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".npz")
SAMPLES, SAMPLE_BYTES = 64, 64 * 1024
META_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")


def fingerprint(model: str) -> str:
    """16 hex digits naming the model's weights (see the module's note); '' for no model."""
    if not model:
        return ""
    path = Path(model)
    digest = hashlib.sha256()
    if not path.is_dir():
        digest.update(b"id\0" + model.encode())
        return digest.hexdigest()[:16]
    for name in META_FILES:
        meta = path / name
        if meta.is_file():
            digest.update(name.encode() + b"\0" + meta.read_bytes() + b"\0")
    weights = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    for weight in weights:
        digest.update(str(weight.relative_to(path)).encode() + b"\0")
        sample_file(weight, digest)
    return digest.hexdigest()[:16]


def sample_file(path: Path, digest) -> None:
    size = path.stat().st_size
    digest.update(size.to_bytes(8, "little"))
    with open(path, "rb") as handle:
        if size <= SAMPLES * SAMPLE_BYTES:
            digest.update(handle.read())
            return
        step = (size - SAMPLE_BYTES) // (SAMPLES - 1)
        for i in range(SAMPLES):
            digest.update(os.pread(handle.fileno(), SAMPLE_BYTES, i * step))


def other_weights(keys: Iterable[str], namespace: str) -> set[str]:
    """Of a tier's keys, the chunk names held under another fingerprint (the same model path with other
    weights, or chunks from before fingerprints): a lookup of one of them misses and is counted."""
    if not namespace:
        return set()
    mine = namespace + "/"
    return {key.split("/", 1)[1] if "/" in key else key for key in list(keys) if not key.startswith(mine)}


def record_model(directory: str, model: str, namespace: str, others: int) -> None:
    """model.json in L2's directory: which weights the tier serves since this start (for operators)."""
    path = os.path.join(directory, "model.json")
    try:
        with open(path + ".tmp", "w") as handle:
            json.dump({"model": model, "fingerprint": namespace, "started": time.time(),
                       "chunks_of_other_weights": others}, handle)
        os.replace(path + ".tmp", path)
    except OSError as exc:   # a record for people; the tier serves without it
        log.warning("kvtier: cannot record the model's fingerprint in %s: %s", path, exc)
    if others:
        log.warning("kvtier: %d chunks in %s belong to other weights than %s (fingerprint %s): never served",
                    others, directory, model, namespace)
