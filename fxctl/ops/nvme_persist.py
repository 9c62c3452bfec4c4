"""Persisting the initiator's path-loss timeouts that nvme-cli cannot pass: JSON, script and boot unit.

nvmf-autoconnect reconnects at boot with what discovery.conf holds, and that cannot carry ctrl_loss_tmo -1
or fast_io_fail_tmo (nvme-cli 2.3): fxctl-nvme-timeouts.service writes them to sysfs after it.
"""

from __future__ import annotations

import json

from fxctl import data
from fxctl.engine.plan import Operation
from fxctl.ops.files import ensure_file

CONFIG_PATH = "/etc/fxctl/nvme-timeouts.json"
SCRIPT_PATH = "/usr/local/lib/fxctl/nvme-timeouts.py"
UNIT_NAME = "fxctl-nvme-timeouts.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"


def timeouts_json(entries: dict[str, dict]) -> str:
    """nqn -> {"timeouts": {key: value}, "paths": N, "iopolicy": policy} (the last two for multipath arrays)
    as the boot script reads it, in a stable form. A bare {key: value} is read as the timeouts."""
    arrays = []
    for nqn, entry in sorted(entries.items()):
        if "timeouts" not in entry:
            entry = {"timeouts": entry}
        arrays.append({"nqn": nqn, **entry, "timeouts": dict(sorted(entry["timeouts"].items()))})
    return json.dumps({"arrays": arrays}, indent=2, sort_keys=True) + "\n"


def persisted_files(timeouts: dict[str, dict]) -> dict[str, tuple[str, str]]:
    return {CONFIG_PATH: (timeouts_json(timeouts), "0644"),
            SCRIPT_PATH: (data.text("nvme_timeouts.py"), "0755"),
            UNIT_PATH: (data.text(UNIT_NAME), "0644")}


def ensure_persisted(timeouts: dict[str, dict], current: dict[str, str | None]) -> Operation:
    """The JSON, the script and the unit hold what the inventory asks for."""
    files = persisted_files(timeouts)
    stale = [path for path, (content, _) in files.items() if current.get(path) != content]
    for path, (content, mode) in files.items():
        yield from ensure_file(path, content, current.get(path), mode)
    return None if stale else f"{CONFIG_PATH} and {UNIT_NAME} are up to date"
