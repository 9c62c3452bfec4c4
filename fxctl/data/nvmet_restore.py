#!/usr/bin/python3
"""fxctl: restore NVMe-oF target exports from fxctl's JSON (nvmetcli's format) into configfs at boot.

Installed by `fxctl provision` on storage targets and run by fxctl-nvmet.service. Idempotent. An RDMA
port can fail to bind while its address is not up yet (EADDRNOTAVAIL, "binding CM ID ... failed (-99)"):
linking a port to its subsystem is retried until the address exists or the deadline passes.
"""

import json
import os
import subprocess
import sys
import time

ROOT = "/sys/kernel/config/nvmet"
DEADLINE_S = float(os.environ.get("FXCTL_NVMET_WAIT", "120"))


def write(path, value):
    with open(path, "w") as handle:
        handle.write(f"{value}\n")


def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def mkdir(path):
    if not os.path.isdir(path):
        os.mkdir(path)


def link(target, name):
    if not os.path.islink(name):
        os.symlink(target, name)


def restore_subsystem(sub):
    path = f"{ROOT}/subsystems/{sub['nqn']}"
    mkdir(path)
    write(f"{path}/attr_allow_any_host", sub.get("attr", {}).get("allow_any_host", "0"))
    for host in sub.get("allowed_hosts", []):
        link(f"{ROOT}/hosts/{host}", f"{path}/allowed_hosts/{host}")
    for ns in sub.get("namespaces", []):
        ns_path = f"{path}/namespaces/{ns['nsid']}"
        mkdir(ns_path)
        if read(f"{ns_path}/enable") == "1":
            continue
        write(f"{ns_path}/device_path", ns["device"]["path"])
        write(f"{ns_path}/device_uuid", ns["device"]["uuid"])
        write(f"{ns_path}/enable", ns.get("enable", 1))


def restore_port(port):
    path = f"{ROOT}/ports/{port['portid']}"
    mkdir(path)
    for key, value in port["addr"].items():
        if not os.listdir(f"{path}/subsystems") and read(f"{path}/addr_{key}") != str(value):
            write(f"{path}/addr_{key}", value)
    deadline = time.monotonic() + DEADLINE_S
    for nqn in port.get("subsystems", []):
        while True:
            try:
                link(f"{ROOT}/subsystems/{nqn}", f"{path}/subsystems/{nqn}")
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise SystemExit(f"port {port['portid']}: cannot bind {port['addr']}: {exc}")
                time.sleep(2)


def main(config_path):
    with open(config_path) as handle:
        config = json.load(handle)
    transports = {p["addr"]["trtype"] for p in config.get("ports", [])}
    subprocess.run(["modprobe", "-a", "nvmet", *[f"nvmet-{t}" for t in sorted(transports)]], check=True)
    if not os.path.isdir(ROOT):
        subprocess.run(["mount", "-t", "configfs", "none", "/sys/kernel/config"], check=False)
    for host in config.get("hosts", []):
        mkdir(f"{ROOT}/hosts/{host['nqn']}")
    for sub in config.get("subsystems", []):
        restore_subsystem(sub)
    for port in config.get("ports", []):
        restore_port(port)
    print(f"fxctl-nvmet: restored {len(config.get('subsystems', []))} subsystem(s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/etc/fxctl/nvmet.json")
