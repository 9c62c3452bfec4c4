"""Benchmark: one command over 16 local sshd endpoints vs over 1, through fxctl's remote layer.

Prints the wall-time ratio (goal: <= 2x), measured side by side in one run, median of several rounds.
Each round connects afresh (key exchange, host-key check, auth) and runs the command: what a
`fxctl provision` fact-gathering round costs.

    python -m benchmarks.ssh_fanout [--hosts 16] [--rounds 5] [--command "uname -a"] [--json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from fxctl.inventory.model import Host
from fxctl.remote.command import sh
from fxctl.remote.pool import run_on_hosts
from tests.support.sshd import SUDO_USER, keygen, start_sshd, sudo_user_ready


def timed_round(hosts: list[Host], argv: list[str]) -> float:
    start = time.perf_counter()
    outcomes = run_on_hosts(hosts, lambda s: s.run(sh(*argv), check=True).exit_code)
    elapsed = time.perf_counter() - start
    failed = [o for o in outcomes.values() if not o.ok]
    if failed:
        raise SystemExit(f"benchmark round failed: {failed[0].host}: {failed[0].error}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="uname -a")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="fxctl-bench-ssh-"))
    folder.chmod(0o755)
    client = keygen(folder / "client")
    servers = [start_sshd(folder / f"h{i}", f"h{i}", client.with_suffix(".pub")) for i in range(args.hosts)]
    try:
        known = folder / "known_hosts"
        known.write_text("".join(s.known_hosts_line() for s in servers))
        # the unprivileged test user when it exists: root's ~/.bashrc here runs `pyenv init` on every
        # SSH command (about 0.1 s of CPU each), which would measure this machine's dotfiles, not fxctl
        user = SUDO_USER if sudo_user_ready() else "root"
        hosts = [Host(name=s.name, address="127.0.0.1", port=s.port, key=str(client), known_hosts=str(known),
                      user=user) for s in servers]
        argv = shlex.split(args.command)
        timed_round(hosts[:1], argv)  # warm up imports and caches
        one, many = [], []
        for _ in range(args.rounds):  # interleaved, so drift hits both sides alike
            one.append(timed_round(hosts[:1], argv))
            many.append(timed_round(hosts, argv))
        t1, tn = statistics.median(one), statistics.median(many)
        result = {"hosts": args.hosts, "rounds": args.rounds, "command": args.command, "user": user,
                  "median_s_1_host": round(t1, 4), f"median_s_{args.hosts}_hosts": round(tn, 4),
                  "ratio": round(tn / t1, 2), "goal": "<= 2.0", "meets_goal": tn / t1 <= 2.0}
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(tabulate([[1, f"{t1:.3f}", "1.00"], [args.hosts, f"{tn:.3f}", f"{tn / t1:.2f}"]],
                           headers=["hosts", "median wall s", "ratio vs 1 host"]))
            print(f"goal <= 2.0x: {'met' if result['meets_goal'] else 'NOT met'} (as {user}; the 16 sshd servers "
                  "share this machine's cores with the client)")
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
