"""Run one tool as a fresh process tree and report its wall time and client CPU (user + sys).

    python benchmarks/fleet/measure.py OUT.json -- COMMAND...

This process is a child subreaper: what the tool leaves behind (ansible's ControlPersist ssh masters)
is re-parented here, stopped after the tool exits and reaped, so getrusage(RUSAGE_CHILDREN) counts the
whole client tree. Plain stdlib: it runs under any of the tools' interpreters.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def main() -> None:
    out, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    left = children(os.getpid())
    for pid in left:
        os.kill(pid, signal.SIGTERM)
    for pid in left:
        os.waitpid(pid, 0)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as handle:
        json.dump({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "user_s": usage.ru_utime,
                   "sys_s": usage.ru_stime, "exit_code": proc.returncode, "left_behind": len(left),
                   "stdout_tail": proc.stdout[-2000:], "stderr_tail": proc.stderr[-2000:]}, handle)


if __name__ == "__main__":
    main()
