"""The anchors' side: run a work plan (waves of host -> commands) with fabric or pyinfra, or write it as an
ansible playbook. Runs as a script under the anchor's own interpreter (pyinfra lives in its own venv);
imports nothing from fxctl.

    python benchmarks/fleet/anchors.py fabric|pyinfra ENDPOINTS.json PLAN.json

Every tool: same hosts, user, key; host keys verified against the same known_hosts file; a fresh
connection per host per wave (as fxctl's fan-outs); every command's exit code and output collected.
Prints one JSON line: commands run, how many exited non-zero, and failures to connect.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def groups(wave: dict[str, list[str]]) -> dict[tuple[str, ...], list[str]]:
    """Hosts with the same command list, so one group call serves them all."""
    by_commands: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for host, commands in wave.items():
        by_commands[tuple(commands)].append(host)
    return by_commands


def run_fabric(endpoints: dict[str, dict], plan: list[dict[str, list[str]]]) -> dict:
    """fabric's ThreadingGroup: one thread per host, one group.run per command (a barrier per command)."""
    import paramiko
    from fabric import Connection, ThreadingGroup

    ran = nonzero = 0
    for wave in plan:
        for commands, names in groups(wave).items():
            connections = []
            for name in names:
                e = endpoints[name]
                conn = Connection(e["address"], user=e["user"], port=e["port"],
                                  connect_kwargs={"key_filename": e["key"], "allow_agent": False,
                                                  "look_for_keys": False})
                conn.client.load_host_keys(e["known_hosts"])
                conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
                connections.append(conn)
            group = ThreadingGroup.from_connections(connections)
            try:
                for command in commands:
                    results = group.run(command, hide=True, warn=True)
                    ran += len(results)
                    nonzero += sum(1 for r in results.values() if r.exited != 0)
            finally:
                group.close()
    return {"commands": ran, "nonzero": nonzero}


def run_pyinfra(endpoints: dict[str, dict], plan: list[dict[str, list[str]]]) -> dict:
    """pyinfra's API: its Command fact per command, a greenlet per host running that host's list in order."""
    import gevent
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.connect import connect_all, disconnect_all
    from pyinfra.api.facts import get_fact
    from pyinfra.facts.server import Command

    ran = nonzero = 0
    for wave in plan:
        hosts = [(name, {"ssh_hostname": endpoints[name]["address"], "ssh_port": endpoints[name]["port"],
                         "ssh_user": endpoints[name]["user"], "ssh_key": endpoints[name]["key"],
                         "ssh_known_hosts_file": endpoints[name]["known_hosts"],
                         "ssh_strict_host_key_checking": "yes"}) for name in wave]
        state = State(Inventory((hosts, {})), Config(PARALLEL=len(hosts), CONNECT_TIMEOUT=60))
        connect_all(state)
        failed = [h.name for h in state.inventory if not h.connected]
        if failed:
            raise SystemExit(f"pyinfra could not connect to {', '.join(failed)}")

        def one(host, wave=wave, state=state):
            outputs = []
            for command in wave[host.name]:
                outputs.append(get_fact(state, host, Command, kwargs={"command": command, "_ignore_errors": True}))
            return outputs

        greenlets = [state.pool.spawn(one, host) for host in state.inventory]
        gevent.joinall(greenlets, raise_error=True)
        ran += sum(len(g.value) for g in greenlets)
        # pyinfra's Command fact keeps no exit code (a failed command gives the fact's default, None)
        nonzero += sum(1 for g in greenlets for value in g.value if value is None)
        disconnect_all(state)
    return {"commands": ran, "nonzero_or_empty": nonzero}


def ansible_files(endpoints: dict[str, dict], plan: list[dict[str, list[str]]], folder, forks: int,
                  module: str) -> list[str]:
    """An inventory, ansible.cfg and a playbook (one play per wave, `gather_facts: false`, strategy free,
    the host's commands as a loop of `module` tasks); returns the ansible-playbook argv."""
    from pathlib import Path

    folder = Path(folder)
    lines = ["all:", "  hosts:"]
    for name, e in endpoints.items():
        lines.append(f"    {name}:")
        lines.append(f"      ansible_host: {e['address']}")
        lines.append(f"      ansible_port: {e['port']}")
        for number, wave in enumerate(plan):
            if name in wave:
                lines.append(f"      wave{number}:")
                lines += [f"        - !unsafe {json.dumps(c)}" for c in wave[name]]
    (folder / "inventory.yml").write_text("\n".join(lines) + "\n")
    first = next(iter(endpoints.values()))
    (folder / "ansible.cfg").write_text(
        "[defaults]\n"
        f"inventory = {folder / 'inventory.yml'}\nforks = {forks}\nhost_key_checking = True\n"
        f"remote_user = {first['user']}\nprivate_key_file = {first['key']}\n"
        "interpreter_python = /usr/bin/python3\nstdout_callback = ansible.builtin.minimal\n"
        f"local_tmp = {folder / 'tmp'}\nretry_files_enabled = False\n"
        "[ssh_connection]\npipelining = True\n"
        f"control_path_dir = {folder / 'cp'}\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={first['known_hosts']} "
        "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes\n")
    plays = []
    for number, wave in enumerate(plan):
        plays.append(
            f"- hosts: {':'.join(wave)}\n  gather_facts: false\n  strategy: free\n  tasks:\n"
            f"    - {module}: \"{{{{ item }}}}\"\n      loop: \"{{{{ wave{number} }}}}\"\n"
            "      changed_when: false\n      failed_when: false\n"
            # the next wave connects afresh, as fxctl's next fan-out does
            "    - meta: reset_connection\n")
    (folder / "playbook.yml").write_text("\n".join(plays))
    return ["ansible-playbook", str(folder / "playbook.yml")]


def main() -> None:
    tool, endpoints_path, plan_path = sys.argv[1:4]
    with open(endpoints_path) as handle:
        endpoints = {e["name"]: e for e in json.load(handle)}
    with open(plan_path) as handle:
        plan = json.load(handle)
    result = (run_fabric if tool == "fabric" else run_pyinfra)(endpoints, plan)
    print(json.dumps({"tool": tool, **result}))


if __name__ == "__main__":
    main()
