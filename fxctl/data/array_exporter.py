#!/usr/bin/env python3
"""fxctl: the health of each NVMe-oF RAID0 array on this initiator, as Prometheus metrics.

Installed by `fxctl provision` on initiators as fxctl-array-exporter.service; runs with the host's python3
and its standard library only. Reads /etc/fxctl/array-exporter.json:
  {"listen": "127.0.0.1:9105", "textfile": "", "arrays": [{"name", "nqn", "md", "mount", "members", "paths"}]}
and, at every scrape of http://<listen>/metrics, reads sysfs and /proc/mounts afresh:
  fxctl_array_controllers{array,state}     controllers of the array's subsystem per state (live, connecting ...)
  fxctl_array_controller_info{array,controller,transport,address,state}   one per controller (value 1)
  fxctl_array_paths_expected{array}        paths the inventory gives (one per listen address)
  fxctl_array_ctrl_loss_tmo_seconds{array,controller}, fxctl_array_reconnect_delay_seconds{...},
  fxctl_array_fast_io_fail_tmo_seconds{...}   the path-loss timeouts in force (-1: never give up)
  fxctl_array_md_up{array}                 1 when the md device exists and runs (array_state clean/active ...)
  fxctl_array_md_state{array,state}        md's array_state (value 1)
  fxctl_array_md_members{array}            members md holds in sync; fxctl_array_md_members_expected{array}
  fxctl_array_mounted{array,mount}         1 when the filesystem is mounted at the inventory's mount point
  fxctl_array_degraded{array}              1 when any of: fewer live paths than expected, md not up, fewer
                                           members than expected, not mounted (the one alert's input)
  fxctl_array_exporter_collect_seconds     time the last collection took
With "textfile" set (a path ending in .prom) the same text is also written there after every collection
and every 15 s, for node-exporter's textfile collector. `--once` prints the text and exits (exit 1 when an
array is degraded), for a look by hand.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONFIG_PATH = "/etc/fxctl/array-exporter.json"
DEFAULT_LISTEN = "127.0.0.1:9105"
RUNNING_MD_STATES = ("clean", "active", "active-idle", "write-pending", "read-auto")
TIMEOUTS = ("ctrl_loss_tmo", "reconnect_delay", "fast_io_fail_tmo")
PREFIX = "fxctl_array"


def read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def controllers(root: Path) -> list[dict]:
    """Every NVMe controller under root (/sys/class/nvme): name, subsysnqn, state, transport, address, timeouts."""
    found = []
    for ctrl in sorted(root.glob("nvme*")):
        entry = {"name": ctrl.name, "nqn": read(ctrl / "subsysnqn"), "state": read(ctrl / "state"),
                 "transport": read(ctrl / "transport"), "address": read(ctrl / "address").replace("\n", " ")}
        for key in TIMEOUTS:
            value = read(ctrl / key)
            entry[key] = None if value in ("", "off") else int(value) if value.lstrip("-").isdigit() else None
        found.append(entry)
    return found


def md_status(device: str, block_root: Path) -> dict:
    """md's array_state and the members in sync, for /dev/md/<name> (None state: no such array)."""
    real = os.path.realpath(device)
    md = block_root / os.path.basename(real) / "md"
    if not real.startswith("/dev/md") or not md.is_dir():
        return {"state": None, "members": 0}
    members = 0
    for dev in md.glob("dev-*"):
        flags = read(dev / "state").split(",")
        if "faulty" not in flags and (dev / "block").exists():
            members += 1
    return {"state": read(md / "array_state") or None, "members": members}


def mounted(mount: str, mounts_text: str) -> bool:
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].replace("\\040", " ") == mount:
            return True
    return False


def escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample(name: str, labels: dict, value) -> str:
    inner = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    return f"{PREFIX}_{name}{{{inner}}} {value}" if inner else f"{PREFIX}_{name} {value}"


HELP = {
    "controllers": ("gauge", "NVMe controllers of the array's subsystem, per state"),
    "controller_info": ("gauge", "One NVMe controller (path) of the array: transport, address, state"),
    "paths_expected": ("gauge", "Paths to the array's subsystem the inventory gives"),
    "ctrl_loss_tmo_seconds": ("gauge", "Seconds a lost path is retried before the kernel gives up (-1: never)"),
    "reconnect_delay_seconds": ("gauge", "Seconds between reconnect attempts of a lost path"),
    "fast_io_fail_tmo_seconds": ("gauge", "Seconds before I/O on a lost path fails fast"),
    "md_up": ("gauge", "1 when the array's md device exists and runs"),
    "md_state": ("gauge", "md array_state of the array (value 1)"),
    "md_members": ("gauge", "md members present and not faulty"),
    "md_members_expected": ("gauge", "md members the inventory gives (drives)"),
    "mounted": ("gauge", "1 when the array's filesystem is mounted at its mount point"),
    "degraded": ("gauge", "1 when a path, a member, the md device or the mount is missing"),
    "exporter_collect_seconds": ("gauge", "Seconds the last collection took"),
}


def collect(config: dict, sys_root: str = "/sys", mounts_path: str = "/proc/mounts") -> tuple[str, bool]:
    """The metrics text for every configured array, and whether any is degraded."""
    started = time.monotonic()
    ctrls = controllers(Path(sys_root) / "class" / "nvme")
    mounts_text = read(Path(mounts_path))
    lines: dict[str, list[str]] = {name: [] for name in HELP}
    any_degraded = False
    for array in config.get("arrays", []):
        name = array["name"]
        mine = [c for c in ctrls if c["nqn"] == array["nqn"]]
        by_state: dict[str, int] = {"live": 0}
        for c in mine:
            by_state[c["state"] or "unknown"] = by_state.get(c["state"] or "unknown", 0) + 1
            lines["controller_info"].append(sample("controller_info", {
                "array": name, "controller": c["name"], "transport": c["transport"], "address": c["address"],
                "state": c["state"]}, 1))
            for key in TIMEOUTS:
                if c[key] is not None:
                    metric = f"{key}_seconds"
                    lines[metric].append(sample(metric, {"array": name, "controller": c["name"]}, c[key]))
        for state, count in sorted(by_state.items()):
            lines["controllers"].append(sample("controllers", {"array": name, "state": state}, count))
        paths = int(array.get("paths", 1))
        lines["paths_expected"].append(sample("paths_expected", {"array": name}, paths))
        md = md_status(array["md"], Path(sys_root) / "block")
        md_up = md["state"] in RUNNING_MD_STATES
        lines["md_up"].append(sample("md_up", {"array": name}, int(md_up)))
        if md["state"]:
            lines["md_state"].append(sample("md_state", {"array": name, "state": md["state"]}, 1))
        lines["md_members"].append(sample("md_members", {"array": name}, md["members"]))
        members = int(array.get("members", 0))
        lines["md_members_expected"].append(sample("md_members_expected", {"array": name}, members))
        is_mounted = mounted(array["mount"], mounts_text)
        lines["mounted"].append(sample("mounted", {"array": name, "mount": array["mount"]}, int(is_mounted)))
        degraded = by_state["live"] < paths or not md_up or md["members"] < members or not is_mounted
        any_degraded |= degraded
        lines["degraded"].append(sample("degraded", {"array": name}, int(degraded)))
    lines["exporter_collect_seconds"].append(sample("exporter_collect_seconds", {},
                                                    round(time.monotonic() - started, 6)))
    out = []
    for name, (kind, text) in HELP.items():
        if lines[name]:
            out += [f"# HELP {PREFIX}_{name} {text}", f"# TYPE {PREFIX}_{name} {kind}", *lines[name]]
    return "\n".join(out) + "\n", any_degraded


def write_textfile(path: str, text: str) -> None:
    """Atomically, as node-exporter's textfile collector expects (it must never read half a file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def serve(config: dict) -> None:
    host, _, port = (config.get("listen") or DEFAULT_LISTEN).rpartition(":")
    textfile = config.get("textfile") or ""
    lock = threading.Lock()

    def refresh() -> str:
        with lock:
            text = collect(config)[0]
            if textfile:
                write_textfile(textfile, text)
            return text

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = refresh().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):   # a scrape every 15 s would flood the journal
            pass

    server = ThreadingHTTPServer((host.strip("[]") or "127.0.0.1", int(port)), Handler)
    if textfile:
        def every_15s():
            while True:
                refresh()
                time.sleep(15)
        threading.Thread(target=every_15s, daemon=True).start()
    print(f"fxctl-array-exporter: {len(config.get('arrays', []))} array(s), http://{host}:{port}/metrics"
          + (f", textfile {textfile}" if textfile else ""), flush=True)
    server.serve_forever()


def main(argv: list[str]) -> int:
    once = "--once" in argv
    paths = [a for a in argv if a != "--once"]
    config = json.loads(Path(paths[0] if paths else CONFIG_PATH).read_text())
    if once:
        text, degraded = collect(config)
        sys.stdout.write(text)
        return 1 if degraded else 0
    serve(config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
