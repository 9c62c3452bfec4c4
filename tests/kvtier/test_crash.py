"""kill -9 in the middle of writes: a restart loses at most the chunks not yet committed, never serves torn
data, and accounts for all space. Run many times (FXCTL_CRASH_RUNS, default 12), each into the same store
so that later runs also recover what earlier crashes left."""

import os
import random
import signal
import subprocess
import sys
import time

from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import PAGE_BYTES, TierStore
from fxctl.kvtier.config import padded

WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_writer.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def committed(progress_path):
    """Keys the writer confirmed put, was removing, and confirmed removed (a key is put once)."""
    puts, removing, removed = {}, set(), set()
    with open(progress_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "P":
                puts[parts[1]] = int(parts[2])
            elif len(parts) == 2 and parts[0] == "r":
                removing.add(parts[1])
            elif len(parts) == 2 and parts[0] == "R":
                removed.add(parts[1])
    return puts, removing, removed


def crash_once(directory, progress, start, rnd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    child = subprocess.Popen([sys.executable, WRITER, directory, progress, str(start)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing", child.stderr.read()
    time.sleep(rnd.uniform(0.02, 0.4))
    child.send_signal(signal.SIGKILL)
    child.wait()


def check_recovered(directory, progress, start):
    puts, removing, removed = committed(progress)
    cfg = small_config(directory, l1_bytes=0, l2_bytes=4 << 30, segment_bytes=64 << 20)
    with TierStore(cfg) as store:
        index = dict(store.l2.index)
        for key in puts:
            if key not in removing:
                assert key in index, f"committed chunk {key} lost"
        for key in removed:
            assert key not in index, f"removed chunk {key} came back"
        # every chunk of the last run (committed or not) and a sample of older ones read back whole and exact
        recent = [k for k in index if int(k[1:]) >= start]
        older = sorted(set(index) - set(recent))
        for key in recent + random.Random(start).sample(older, min(24, len(older))):
            entry = index[key]
            out = bytearray(entry.loc.nbytes)
            assert store.get_into([key], [out]) == [entry.loc.nbytes], key
            assert bytes(out) == chunk_bytes(key, entry.loc.nbytes), f"torn data served for {key}"
        usage = store.stats()["l2"]
        assert usage["used_bytes"] == sum(padded(e.loc.nbytes) for e in index.values())
        assert usage["used_bytes"] % PAGE_BYTES == 0
        assert store.stats()["counters"].get("l2_checksum_failures", 0) == 0
        names = os.listdir(directory)
        assert [n for n in names if n.startswith("journal.")] == [f"journal.{store.l2.journal.generation}"]
        assert all(n.startswith(("segment.", "journal.")) or n in ("manifest", "lock") for n in names), names
        return len(index), store.stats()["recovery"]


def test_sigkill_mid_write_recovers_committed_chunks(disk_dir, tmp_path):
    runs = int(os.environ.get("FXCTL_CRASH_RUNS", "12"))
    rnd = random.Random(int(os.environ.get("FXCTL_CRASH_SEED", "1")))
    progress = str(tmp_path / "progress")
    open(progress, "w").close()
    start = 0
    for _run in range(runs):
        crash_once(disk_dir, progress, start, rnd)
        found, _recovery = check_recovered(disk_dir, progress, start)
        start += 10_000
        assert found > 0
