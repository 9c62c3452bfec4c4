"""Where fxctl's cold load loses to LMCache's anchors on a CPU-copying medium (tmpfs): two A/Bs.

1. fxctl's request size where the CPU copies (`TierConfig.piece_bytes`): 1, 4 and 32 MiB requests, read
   checksums on and off, each setting in fresh processes (order rotated), through the same harness as
   `fxctl bench tier` (fxctl/tierbench/restore.py: the timer around the restore call only).
2. A bare preadv loop (no tier): the same chunks read from one preallocated segment file (fxctl's layout)
   and from one freshly written file per chunk (LocalDiskBackend's), 2 threads, alternating, same process;
   every chunk compared with what was written after each timed read.

    python -m benchmarks.tier_read_path --dir /tmp/fxtmpfs/readpath [--repeats 2] [--size 32m]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

from tabulate import tabulate

from fxctl.paths import scratch_dir

PIECES = (1 << 20, 4 << 20, 32 << 20)


def piece_trial(directory: str, piece: int, verify: bool, size: str) -> list[float]:
    """One fresh process: fxctl's restore at this piece size; the cold passes' GB/s."""
    code = ("import functools, json, sys; import fxctl.kvtier as kv; "
            "kv.TierConfig = functools.partial(kv.TierConfig, piece_bytes=int(sys.argv[1])); "
            "from fxctl.tierbench.restore import measure; from fxctl.tierbench.chunks import SHAPES; "
            "out = measure(sys.argv[2], sys.argv[3], SHAPES[sys.argv[4]], 512 << 20, 512 << 20, 2, 3); "
            "print(json.dumps(out['restore_gbps']['all']))")
    backend = "fxctl" if verify else "fxctl-unverified"
    proc = subprocess.run([sys.executable, "-c", code, str(piece), backend, directory, size],
                          capture_output=True, text=True, check=True)
    shutil.rmtree(directory, ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def layout_ab(directory: str, rounds: int, chunk: int = 32 << 20, chunks: int = 16) -> dict[str, list[float]]:
    from fxctl.kvtier.buffers import aligned_buffer
    from fxctl.tierbench.restore import faulted_in

    os.makedirs(directory, exist_ok=True)
    data = os.urandom(chunk)
    seg = os.open(os.path.join(directory, "segment"), os.O_CREAT | os.O_RDWR, 0o644)
    os.posix_fallocate(seg, 0, chunks * chunk)
    for i in range(chunks):
        os.pwrite(seg, data, i * chunk)
    files = []
    for i in range(chunks):
        fd = os.open(os.path.join(directory, f"chunk{i}"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        os.write(fd, data)
        files.append(fd)
    dests = [faulted_in(aligned_buffer(chunk)) for _ in range(chunks)]

    def read_all(where) -> float:
        left = list(range(chunks))
        lock = threading.Lock()

        def reader() -> None:
            while True:
                with lock:
                    if not left:
                        return
                    i = left.pop()
                fd, base = where(i)
                os.preadv(fd, [dests[i]], base)

        threads = [threading.Thread(target=reader) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gbps = chunks * chunk / (time.perf_counter() - t0) / 1e9
        if any(dest != data for dest in dests):  # checked after the timer, every chunk
            raise RuntimeError("a chunk read back differs from what was written")
        for dest in dests:
            dest[:1] = b"\0"  # the next read must write it again
        return gbps

    out: dict[str, list[float]] = {"one segment file (fxctl)": [], "a file per chunk (LocalDisk)": []}
    layouts = [("one segment file (fxctl)", lambda i: (seg, i * chunk)),
               ("a file per chunk (LocalDisk)", lambda i: (files[i], 0))]
    for r in range(rounds):
        for name, where in layouts if r % 2 == 0 else layouts[::-1]:
            out[name].append(read_all(where))
    for fd in [seg, *files]:
        os.close(fd)
    shutil.rmtree(directory, ignore_errors=True)
    return out


def row(name: str, values: list[float]) -> list:
    return [name, f"{min(values):.2f}", f"{statistics.median(values):.2f}", f"{max(values):.2f}", len(values)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="directory on the medium (a tmpfs); the run works in a new "
                    "fxctl-bench-* directory inside it, deleted afterwards")
    ap.add_argument("--size", default="32m", choices=("32m", "4m"))
    ap.add_argument("--repeats", type=int, default=2, help="fresh processes per piece setting")
    ap.add_argument("--rounds", type=int, default=10, help="reads per layout in the bare A/B")
    a = ap.parse_args()
    results: dict[str, list[float]] = {}
    settings = [(p, v) for p in PIECES for v in (True, False)]
    with scratch_dir(a.dir) as base:  # a new directory inside --dir: nothing else there is touched
        for rep in range(a.repeats):
            for piece, verify in settings if rep % 2 == 0 else settings[::-1]:
                name = f"fxctl, {piece >> 20} MiB requests, checksums {'on' if verify else 'off'}"
                results.setdefault(name, []).extend(piece_trial(os.path.join(base, "pieces"), piece, verify,
                                                                a.size))
        print(tabulate([row(k, v) for k, v in results.items()], ["restore (fxctl's harness)", "min GB/s", "median",
                                                                  "max", "passes"]))
        bare = layout_ab(os.path.join(base, "layout"), a.rounds)
    print()
    print(tabulate([row(k, v) for k, v in bare.items()], ["bare preadv, 2 threads", "min GB/s", "median", "max",
                                                           "reads"]))


if __name__ == "__main__":
    main()
