#!/usr/bin/env python3
"""fxctl: re-apply NVMe-oF path-loss timeouts that nvme-cli cannot pass, and multipath arrays' I/O policy
(fxctl-nvme-timeouts.service).

Installed by `fxctl provision` on initiators; runs at boot after nvmf-autoconnect.service (and again
whenever that unit restarts). nvme-cli 2.3 has no --fast_io_fail_tmo, and the fabrics device refuses
ctrl_loss_tmo -1 at connect (EINVAL on Linux 6.1): fxctl writes them to /sys/class/nvme/nvmeX/ after
connecting, and this script does the same for the controllers that autoconnect made at boot.
Reads /etc/fxctl/nvme-timeouts.json: {"arrays": [{"nqn": ..., "timeouts": {"reconnect_delay": 2, ...},
"paths": 2, "iopolicy": "round-robin"}]} ("paths" and "iopolicy" for arrays with several paths).
Waits up to "wait_s" (default 60) until each array has as many live controllers as paths; exit 1 naming
those that never came (the ones that did have their settings).
"""

import json
import sys
import time
from pathlib import Path

ORDER = ("reconnect_delay", "ctrl_loss_tmo", "fast_io_fail_tmo")  # the kernel counts ctrl_loss in delays


def read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def apply(controller: Path, timeouts: dict) -> list[str]:
    done = []
    for key in ORDER:
        if key in timeouts and (controller / key).exists():
            (controller / key).write_text(f"{int(timeouts[key])}\n")
            done.append(f"{key}={timeouts[key]}")
    return done


def set_iopolicy(subsystems: Path, nqn: str, policy: str) -> str:
    for subsystem in sorted(subsystems.glob("nvme-subsys*")):
        if read(subsystem / "subsysnqn") == nqn:
            if read(subsystem / "iopolicy") != policy:
                (subsystem / "iopolicy").write_text(f"{policy}\n")
            return f"{subsystem.name} iopolicy {policy}"
    return ""


def main(config_path: str, controllers: str = "/sys/class/nvme",
         subsystems: str = "/sys/class/nvme-subsystem") -> int:
    config = json.loads(Path(config_path).read_text())
    wanted = {entry["nqn"]: entry for entry in config.get("arrays", [])}
    deadline = time.monotonic() + float(config.get("wait_s", 60))
    done: dict[str, set] = {nqn: set() for nqn in wanted}
    policies: set = set()
    while True:
        for controller in sorted(Path(controllers).glob("nvme*")):
            nqn = read(controller / "subsysnqn")
            if nqn in wanted and controller.name not in done[nqn] and read(controller / "state") == "live":
                applied = apply(controller, wanted[nqn]["timeouts"])
                print(f"fxctl-nvme-timeouts: {controller.name} ({nqn}): {', '.join(applied)}")
                done[nqn].add(controller.name)
        for nqn, entry in wanted.items():
            if entry.get("iopolicy") and done[nqn] and nqn not in policies:
                if said := set_iopolicy(Path(subsystems), nqn, entry["iopolicy"]):
                    print(f"fxctl-nvme-timeouts: {said} ({nqn})")
                    policies.add(nqn)
        pending = [nqn for nqn, entry in wanted.items() if len(done[nqn]) < int(entry.get("paths", 1))]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1)
    for nqn in sorted(pending):
        count = len(done[nqn])
        said = f"only {count} of {wanted[nqn].get('paths', 1)} paths live" if count else "no live controller"
        print(f"fxctl-nvme-timeouts: {said} for {nqn}", file=sys.stderr)
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]) if len(sys.argv) > 1 else main("/etc/fxctl/nvme-timeouts.json"))
