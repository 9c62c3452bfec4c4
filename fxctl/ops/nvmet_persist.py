"""Persisting the target's exports: nvmetcli-format JSON, fxctl's restore script and its boot unit."""

from __future__ import annotations

import json

from fxctl import data
from fxctl.engine.plan import Operation
from fxctl.ops.files import ensure_file
from fxctl.ops.nvmet import ExportSpec

CONFIG_PATH = "/etc/fxctl/nvmet.json"
SCRIPT_PATH = "/usr/local/lib/fxctl/nvmet-restore.py"
UNIT_NAME = "fxctl-nvmet.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"


def nvmetcli_json(specs: list[ExportSpec]) -> str:
    """The exports as nvmetcli's JSON (so `nvmetcli restore` could read it too)."""
    hosts = sorted({h for spec in specs for h in spec.hosts})
    ports: dict[int, dict] = {}
    for spec in specs:
        for want in spec.ports:
            port = ports.setdefault(want.port_id, {
                "addr": {"adrfam": want.adrfam, "traddr": want.address, "treq": "not specified",
                         "trsvcid": str(want.port), "trtype": spec.transport},
                "portid": want.port_id, "referrals": [], "subsystems": []})
            port["subsystems"].append(spec.nqn)
    subsystems = [{
        "allowed_hosts": sorted(spec.hosts), "attr": {"allow_any_host": "0"}, "nqn": spec.nqn,
        "namespaces": [{"device": {"path": ns.device, "uuid": ns.uuid}, "enable": 1, "nsid": ns.nsid}
                       for ns in spec.namespaces]} for spec in specs]
    document = {"hosts": [{"nqn": h} for h in hosts], "ports": [ports[k] for k in sorted(ports)],
                "subsystems": subsystems}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def persisted_files(specs: list[ExportSpec]) -> dict[str, tuple[str, str]]:
    """path -> (content, mode) of everything the target needs to restore its exports at boot."""
    return {CONFIG_PATH: (nvmetcli_json(specs), "0644"),
            SCRIPT_PATH: (data.text("nvmet_restore.py"), "0755"),
            UNIT_PATH: (data.text("fxctl-nvmet.service"), "0644")}


def ensure_persisted(specs: list[ExportSpec], current: dict[str, str | None]) -> Operation:
    """The JSON, the restore script and the unit hold what the inventory asks for."""
    files = persisted_files(specs)
    stale = [path for path, (content, _) in files.items() if current.get(path) != content]
    for path, (content, mode) in files.items():
        yield from ensure_file(path, content, current.get(path), mode)
    return None if stale else f"{CONFIG_PATH} and {UNIT_NAME} are up to date"
