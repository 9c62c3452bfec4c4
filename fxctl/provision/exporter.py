"""The array exporter round: each initiator runs fxctl-array-exporter.service watching its arrays.

Provisioning adds the arrays it provisions to those the host's exporter already watches (an array of the
inventory not yet provisioned is not watched: it would read as degraded); destroying removes them, and
with none left the unit is stopped and its files removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.engine.plan import Step, run_operation
from fxctl.facts.files import FileContent
from fxctl.facts.systemd import UnitActive, UnitEnabled
from fxctl.inventory.model import ArraySpec, Host, MonitoringSpec
from fxctl.ops import array_exporter
from fxctl.provision import naming


def watch_entry(array: ArraySpec) -> dict:
    """What the exporter needs of one array: its subsystem, md device, mount, members and paths."""
    return {"name": array.name, "nqn": array.nqn, "md": naming.md_device(array), "mount": array.mount,
            "members": len(array.drives), "paths": 1}


@dataclass
class ExporterRecipe:
    """`every`: the inventory's arrays; `chosen`: those this run provisions (or, removing, destroys)."""

    every: tuple[ArraySpec, ...]
    chosen: tuple[ArraySpec, ...]
    monitoring: MonitoringSpec
    removing: bool = False

    def facts(self, host: Host):
        facts = {path: FileContent(path) for path in array_exporter.persisted_files("")}
        return {**facts, "enabled": UnitEnabled(array_exporter.UNIT_NAME),
                "active": UnitActive(array_exporter.UNIT_NAME)}

    def plan(self, host: Host, facts: dict) -> list[Step]:
        watched = array_exporter.watched_names(facts[array_exporter.CONFIG_PATH])
        chosen = {a.name for a in self.chosen if host.name in a.initiators}
        names = watched - chosen if self.removing else watched | chosen
        arrays = [a for a in self.every if a.name in names and host.name in a.initiators]
        if not arrays:
            if not self.removing:
                return []
            return [run_operation("array exporter", array_exporter.ensure_removed(
                facts, facts["enabled"], bool(facts["active"])))]
        listen = f"{self.monitoring.exporter_address}:{self.monitoring.exporter_port}"
        config = array_exporter.config_json([watch_entry(a) for a in arrays], listen, self.monitoring.exporter_textfile)
        return [run_operation("array exporter", array_exporter.ensure_running(
            config, facts, facts["enabled"], bool(facts["active"])))]
