"""Child process of test_crash: writes and removes chunks forever, logging what it knows is committed.

Usage: crash_writer.py L2_DIR PROGRESS_FILE START
Each line of PROGRESS_FILE is written only after the store confirmed it: "P key size" after flush() of a
put, "r key" before remove() and "R key" after it returned. The parent kills this process with SIGKILL at a
random moment.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kvtier_helpers import chunk_bytes, small_config  # noqa: E402

from fxctl.kvtier import TierStore  # noqa: E402


def main() -> None:
    directory, progress_path, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = small_config(directory, l1_bytes=1 << 20, l2_bytes=4 << 30, segment_bytes=64 << 20,
                       write_threads=2, durable=True, checkpoint_records=40)
    store = TierStore(cfg)
    progress = open(progress_path, "a", buffering=1)
    sizes = (4096, 70_000, 300_001, 600_000)
    i = start
    while True:
        batch = []
        for _ in range(4):
            key, size = f"c{i}", sizes[i % len(sizes)]
            store.put(key, chunk_bytes(key, size))
            batch.append((key, size))
            i += 1
        store.flush()
        for key, size in batch:
            progress.write(f"P {key} {size}\n")
        victim = f"c{i - 9}"
        if i % 3 == 0:
            progress.write(f"r {victim}\n")  # about to remove: it may be gone after a crash
            if store.remove(victim):
                progress.write(f"R {victim}\n")
        if i == start + 4:
            print("writing", flush=True)


if __name__ == "__main__":
    main()
