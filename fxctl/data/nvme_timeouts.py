#!/usr/bin/env python3
"""fxctl: re-apply NVMe-oF path-loss timeouts that nvme-cli cannot pass (fxctl-nvme-timeouts.service).

Installed by `fxctl provision` on initiators; runs at boot after nvmf-autoconnect.service (and again
whenever that unit restarts). nvme-cli 2.3 has no --fast_io_fail_tmo, and the fabrics device refuses
ctrl_loss_tmo -1 at connect (EINVAL on Linux 6.1): fxctl writes them to /sys/class/nvme/nvmeX/ after
connecting, and this script does the same for the controllers that autoconnect made at boot.
Reads /etc/fxctl/nvme-timeouts.json: {"arrays": [{"nqn": ..., "timeouts": {"reconnect_delay": 2, ...}}]}.
Waits up to "wait_s" (default 60) for each array's controller; exit 1 naming those that never came.
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


def main(config_path: str, controllers: str = "/sys/class/nvme") -> int:
    config = json.loads(Path(config_path).read_text())
    wanted = {entry["nqn"]: entry["timeouts"] for entry in config.get("arrays", [])}
    deadline = time.monotonic() + float(config.get("wait_s", 60))
    pending = set(wanted)
    while True:
        for controller in sorted(Path(controllers).glob("nvme*")):
            nqn = read(controller / "subsysnqn")
            if nqn in wanted and read(controller / "state") == "live":
                print(f"fxctl-nvme-timeouts: {controller.name} ({nqn}): {', '.join(apply(controller, wanted[nqn]))}")
                pending.discard(nqn)
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1)
    for nqn in sorted(pending):
        print(f"fxctl-nvme-timeouts: no live controller for {nqn}", file=sys.stderr)
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]) if len(sys.argv) > 1 else main("/etc/fxctl/nvme-timeouts.json"))
