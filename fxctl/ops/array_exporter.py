"""The array exporter on an initiator: its config (the arrays it watches), script and unit, running.

fxctl-array-exporter.service (fxctl/data/array_exporter.py) serves each array's health (paths, md,
members, mount) as Prometheus metrics, so an alert on a degraded array fires without fxctl running.
"""

from __future__ import annotations

import json

from fxctl import data
from fxctl.engine.plan import Operation, Refused
from fxctl.ops.files import ensure_file
from fxctl.remote.command import sh

CONFIG_PATH = "/etc/fxctl/array-exporter.json"
SCRIPT_PATH = "/usr/local/lib/fxctl/array-exporter.py"
UNIT_NAME = "fxctl-array-exporter.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"


def config_json(arrays: list[dict], listen: str, textfile: str | None) -> str:
    """What the exporter reads: where it listens and the arrays it watches, in a stable form."""
    body = {"listen": listen, "textfile": textfile or "", "arrays": sorted(arrays, key=lambda a: a["name"])}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def watched_names(current_config: str | None) -> set[str]:
    """The arrays a config on the host names (none when it is missing or not fxctl's JSON)."""
    try:
        return {a["name"] for a in json.loads(current_config or "{}").get("arrays", [])}
    except (ValueError, AttributeError, TypeError, KeyError):
        return set()


def persisted_files(config: str) -> dict[str, tuple[str, str]]:
    return {CONFIG_PATH: (config, "0644"), SCRIPT_PATH: (data.text("array_exporter.py"), "0755"),
            UNIT_PATH: (data.text(UNIT_NAME), "0644")}


def ensure_running(config: str, current: dict[str, str | None], enabled: str | None, active: bool) -> Operation:
    """The files hold what is asked, the unit is enabled and running, restarted when a file changed."""
    if enabled is None:
        raise Refused(f"systemd is not running here: cannot run {UNIT_NAME}")
    files = persisted_files(config)
    stale = [path for path, (content, _) in files.items() if current.get(path) != content]
    for path, (content, mode) in files.items():
        yield from ensure_file(path, content, current.get(path), mode)
    if not stale and enabled == "enabled" and active:
        return f"{UNIT_NAME} runs with {CONFIG_PATH} as asked"
    if stale:
        yield sh("systemctl", "daemon-reload")
    if enabled != "enabled":
        yield sh("systemctl", "enable", UNIT_NAME)
    yield sh("systemctl", "restart" if active else "start", UNIT_NAME)
    return None


def ensure_removed(current: dict[str, str | None], enabled: str | None, active: bool) -> Operation:
    """No array left to watch: the unit stopped and disabled, its files gone."""
    present = [path for path in persisted_files("") if current.get(path) is not None]
    if not present and not active and enabled in (None, "not-found", "disabled"):
        return f"{UNIT_NAME} is not installed"
    if enabled not in (None, "not-found"):
        yield sh("systemctl", "disable", "--now", UNIT_NAME)
    if present:
        yield sh("rm", "-f", *present)
    if enabled is not None:
        yield sh("systemctl", "daemon-reload")
    return None
