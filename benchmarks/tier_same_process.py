"""Cold loads of fxctl (with and without read checksums) and LMCache's LocalDiskBackend in ONE process,
passes alternated: the complement of `fxctl bench tier`'s fresh process per backend.

Fresh processes keep one backend's heap, threads and page cache from another's, but on a tmpfs each backend's
data then sits in pages placed by a different process, and those figures move 10-20 % between processes. Here
the three backends hold their data side by side and take turns: every pass is timed by the same code as
`fxctl bench tier` (fxctl/tierbench/restore.py: `cold_pass`, the backend's call only inside the timer, every
chunk checked byte for byte after it), in rotating order, so what differs between them is the backend.

    python -m benchmarks.tier_same_process --dir /tmp/fxtmpfs/same [--size 32m] [--rounds 12] [--io-threads 2]

Needs `lmcache` (the repository's venv) and room for three copies of --total on the medium; as root the page
cache is dropped before each pass (a no-op on tmpfs, whose pages are the data).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys

from tabulate import tabulate

from fxctl.paths import scratch_dir
from fxctl.tierbench.chunks import SHAPES, ChunkSource
from fxctl.tierbench.restore import BACKENDS, cold_pass, make_backend, store_all
from fxctl.units import MIB, parse_size


def run(directory: str, size: str, total: int, rounds: int, io_threads: int) -> dict[str, list[dict]]:
    shape = SHAPES[size]
    chunks = max(1, total // shape.nbytes)
    source = ChunkSource(shape.nbytes)
    keys = [source.key(i) for i in range(chunks)]
    backends = {}
    try:
        for name in BACKENDS:
            where = os.path.join(directory, name)
            shutil.rmtree(where, ignore_errors=True)
            os.makedirs(where)
            backend = make_backend(name, where, shape, chunks, chunks, io_threads)
            backends[name] = (backend, where)
            store_all(backend, source, keys)
        passes: dict[str, list[dict]] = {name: [] for name in backends}
        names = list(backends)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # each backend first in turn
                backend, where = backends[name]
                p = cold_pass(backend, source, keys, chunks, where)
                if p["verified"] != chunks:
                    raise RuntimeError(f"{name}: {p['verified']}/{chunks} chunks read back intact")
                passes[name].append(p)
        return passes
    finally:
        for backend, where in backends.values():
            backend.close()
            shutil.rmtree(where, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="directory on the medium; the run works in a new fxctl-bench-* "
                    "directory inside it, deleted afterwards")
    ap.add_argument("--size", default="32m", choices=sorted(SHAPES))
    ap.add_argument("--total", default="512M", help="bytes of KV per backend")
    ap.add_argument("--rounds", type=int, default=12, help="cold passes per backend")
    ap.add_argument("--io-threads", type=int, default=2)
    a = ap.parse_args()
    with scratch_dir(a.dir) as where:  # a new directory inside --dir: nothing else there is touched
        passes = run(where, a.size, parse_size(a.total), a.rounds, a.io_threads)
    ref = statistics.median(p["gbps"] for p in passes["lmcache-localdisk"])
    rows = []
    for name, ps in passes.items():
        gbps = [p["gbps"] for p in ps]
        cpu = statistics.median(p["cpu_s_per_gb"] for p in ps)
        rows.append([name, f"{min(gbps):.2f}", f"{statistics.median(gbps):.2f}", f"{max(gbps):.2f}",
                     f"{cpu:.3f}", f"{statistics.median(gbps) / ref:.2f}"])
    print(f"{a.size} chunks ({SHAPES[a.size].nbytes / MIB:.4g} MiB), {a.total} per backend, {a.io_threads} I/O "
          f"threads, {a.rounds} cold passes each, one process, order rotated")
    print(tabulate(rows, ["backend", "min GB/s", "median", "max", "CPU s/GB", "median / LocalDisk"]))
    sys.stdout.flush()
    os._exit(0)  # LMCache's StorageManager leaves non-daemon threads behind after close()


if __name__ == "__main__":
    main()
