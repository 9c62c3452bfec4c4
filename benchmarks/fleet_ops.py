"""Benchmark: fleet-wide fxctl operations over N local sshd hosts against fabric, pyinfra and ansible.

    flock /tmp/fxctl-heavy.lock python -m benchmarks.fleet_ops [--hosts 64] [--rounds 3]
        [--op provision-check --op net-verify] [--tool fxctl --tool fabric ...] [--json OUT]

fxctl runs as its real CLI in a subprocess (`fxctl -o json provision --check`, `fxctl -o json net verify`).
The anchors run the same work: the exact commands fxctl's facts send (recorded from an untimed reference
run, per fan-out and host, sudo wrapper included), on the same hosts, user, key and known_hosts (host keys
verified by every tool), a fresh connection per host per fan-out. Each tool runs in a fresh process tree
per round (benchmarks/fleet/measure.py: wall time, and user+sys CPU of the whole client tree through
RUSAGE_CHILDREN); the order rotates every round. The anchors (pyinfra, ansible-core) live in their own
venv (--anchors-env, made by --install-anchors): pyinfra 3.10 needs paramiko < 5 and the dev venv has 5.1,
which fxctl and fabric use; installing it there would change what fxctl itself is measured with.
The sshd servers share this machine's cores with the clients: read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from benchmarks.fleet import hosts, workplan
from benchmarks.fleet.anchors import ansible_files

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "benchmarks" / "fleet"
ANCHORS_ENV = Path.home() / ".cache" / "fxctl" / "anchors-env"
ANCHOR_PINS = ("pyinfra==3.10.0", "ansible-core==2.19.14")
TOOLS = ("fxctl", "fabric", "pyinfra", "ansible", "ansible-raw")


def install_anchors(env: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "pip"), "install", "-q", *ANCHOR_PINS], check=True)


class Runs:
    """The argv (and environment) of each tool for one operation."""

    def __init__(self, folder: Path, operation: str, inventory: Path, endpoints: Path, plan: Path,
                 waves: list[dict[str, list[str]]], env: Path, forks: int):
        self.folder, self.operation, self.env = folder, operation, env
        self.inventory, self.endpoints, self.plan = inventory, endpoints, plan
        by_name = {e["name"]: e for e in json.loads(endpoints.read_text())}
        self.ansible = {}
        for tool, module in (("ansible", "ansible.builtin.shell"), ("ansible-raw", "ansible.builtin.raw")):
            where = folder / f"{operation}-{tool}"
            where.mkdir(exist_ok=True)
            self.ansible[tool] = (where, ansible_files(by_name, waves, where, forks, module))

    def command(self, tool: str) -> tuple[list[str], dict[str, str]]:
        env = dict(os.environ, FXCTL_RUN_DIR=str(self.folder / "runs"))
        if tool == "fxctl":
            return [str(REPO / ".venv" / "bin" / "fxctl"), "-i", str(self.inventory), "-o", "json",
                    *workplan.OPERATIONS[self.operation]], env
        if tool in ("fabric", "pyinfra"):
            python = REPO / ".venv" / "bin" / "python" if tool == "fabric" else self.env / "bin" / "python"
            return [str(python), str(FLEET / "anchors.py"), tool, str(self.endpoints), str(self.plan)], env
        where, argv = self.ansible[tool]
        env.update(ANSIBLE_CONFIG=str(where / "ansible.cfg"), PATH=f"{self.env / 'bin'}:{env['PATH']}")
        return [str(self.env / "bin" / argv[0]), *argv[1:]], env

    def measure(self, tool: str) -> dict:
        argv, env = self.command(tool)
        out = self.folder / f"measure-{tool}.json"
        subprocess.run([sys.executable, str(FLEET / "measure.py"), str(out), "--", *argv], env=env, check=True,
                       cwd=self.folder)
        return json.loads(out.read_text())


def check_run(tool: str, result: dict, expected: dict, planned: int) -> str:
    """What makes a run count: fxctl's exit code and plan as the reference run's; every anchor command run."""
    if tool == "fxctl":
        if result["exit_code"] != expected["exit_code"]:
            return f"exit {result['exit_code']}, the reference run {expected['exit_code']}: {result['stderr_tail']}"
        return ""
    if tool.startswith("ansible"):
        return "" if result["exit_code"] == 0 else f"exit {result['exit_code']}: {result['stdout_tail'][-600:]}"
    if result["exit_code"] != 0:
        return f"exit {result['exit_code']}: {result['stderr_tail'][-600:]}"
    ran = json.loads(result["stdout_tail"].strip().splitlines()[-1])["commands"]
    return "" if ran == planned else f"ran {ran} commands of {planned}"


def only_planned(runs: Path, planned: set[str]) -> bool:
    """Every command in the journals of fxctl's timed runs is one of the reference runs' fact reads: the
    --check runs sent nothing else (no apply step) to any host."""
    sent = [json.loads(line)["command"] for path in runs.glob("*/journal.jsonl")
            for line in path.read_text().splitlines() if line.strip()]
    return bool(sent) and set(sent) <= planned


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def report(operation: str, results: dict[str, list[dict]], counts: dict) -> list[list[str]]:
    rows = []
    base = results["fxctl"]
    for tool, runs in results.items():
        walls, cpus = [r["wall_s"] for r in runs], [r["cpu_s"] for r in runs]
        wall_ratios = [b["wall_s"] / r["wall_s"] for b, r in zip(base, runs)]
        cpu_ratios = [b["cpu_s"] / r["cpu_s"] for b, r in zip(base, runs)]
        rows.append([operation, tool, spread(walls), spread(cpus),
                     "-" if tool == "fxctl" else spread(wall_ratios),
                     "-" if tool == "fxctl" else spread(cpu_ratios)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--op", dest="ops", action="append", choices=list(workplan.OPERATIONS))
    parser.add_argument("--tool", dest="tools", action="append", choices=TOOLS)
    parser.add_argument("--anchors-env", type=Path, default=ANCHORS_ENV)
    parser.add_argument("--install-anchors", action="store_true", help="make the anchors' venv first")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args()
    ops, tools = args.ops or list(workplan.OPERATIONS), args.tools or list(TOOLS)
    if "fxctl" not in tools:
        tools.insert(0, "fxctl")
    if args.install_anchors:
        install_anchors(args.anchors_env)
    if args.hosts < 2 or args.hosts % 2:
        raise SystemExit("--hosts: an even number >= 2 (hosts pair up as target and initiator)")

    folder = Path(tempfile.mkdtemp(prefix="fxctl-fleet-"))
    folder.chmod(0o755)
    started = time.time()
    servers, endpoints = hosts.start_fleet(folder, args.hosts)
    planned: set[str] = set()
    out: dict = {"hosts": args.hosts, "rounds": args.rounds, "user": endpoints[0].user, "operations": {}}
    try:
        inventory = hosts.write_inventory(folder / "inventory.yaml", endpoints)
        endpoints_file = folder / "endpoints.json"
        hosts.write_endpoints(endpoints_file, endpoints)
        before = hosts.host_state()
        with hosts.DriveLinks(args.hosts // 2):
            for operation in ops:
                waves, expected = workplan.reference_run(operation, inventory, folder)
                planned |= {c for wave in waves for commands in wave.values() for c in commands}
                plan = folder / f"plan-{operation}.json"
                workplan.write_plan(plan, waves)
                counts = workplan.count(waves)
                runs = Runs(folder, operation, inventory, endpoints_file, plan, waves, args.anchors_env,
                            forks=args.hosts)
                results: dict[str, list[dict]] = {tool: [] for tool in tools}
                for tool in tools:  # warm-up (untimed): every tool does the whole work, or the run stops
                    problem = check_run(tool, runs.measure(tool), expected, counts["commands"])
                    if problem:
                        raise SystemExit(f"{operation}: {tool} did not do the work: {problem}")
                for number in range(args.rounds):
                    order = tools[number % len(tools):] + tools[:number % len(tools)]
                    for tool in order:
                        result = runs.measure(tool)
                        problem = check_run(tool, result, expected, counts["commands"])
                        if problem:
                            raise SystemExit(f"{operation} round {number}: {tool}: {problem}")
                        results[tool].append({"wall_s": round(result["wall_s"], 3),
                                              "cpu_s": round(result["cpu_s"], 3), "order": order.index(tool)})
                    print(f"{operation}: round {number + 1}/{args.rounds} done "
                          f"({time.time() - started:.0f} s)", file=sys.stderr)
                out["operations"][operation] = {"fxctl_result": expected, **counts, "results": results}
        after = hosts.host_state()
        out["hosts_unchanged"] = before == after
        out["changed_state"] = [k for k in before if before[k] != after[k]]
        out["fxctl_sent_only_fact_commands"] = only_planned(folder / "runs", planned)
    finally:
        hosts.stop_fleet(servers)
        shutil.rmtree(folder, ignore_errors=True)
    rows = [row for operation, data in out["operations"].items()
            for row in report(operation, data["results"], data)]
    print(tabulate(rows, headers=["operation", "tool", "wall s (min/med/max)", "client CPU s", "fxctl/tool wall",
                                  "fxctl/tool CPU"]))
    for operation, data in out["operations"].items():
        print(f"{operation}: {data['waves']} fan-outs, {data['host_connections']} host connections, "
              f"{data['commands']} commands; fxctl's result: {json.dumps(data['fxctl_result'])[:300]}")
    print(f"{args.hosts} hosts as {out['user']}, {args.rounds} rounds; fxctl's runs sent only fact reads: "
          f"{out['fxctl_sent_only_fact_commands']}; hosts unchanged by the runs: {out['hosts_unchanged']}"
          + (f" (changed: {out['changed_state']})" if out["changed_state"] else ""))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
