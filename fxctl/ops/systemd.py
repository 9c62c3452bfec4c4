"""Operations on systemd units."""

from __future__ import annotations

from fxctl.engine.plan import Operation, Refused
from fxctl.remote.command import sh


def ensure_unit_enabled(unit: str, enabled: str | None, *, reload: bool = False) -> Operation:
    """The unit is enabled at boot. `enabled` is UnitEnabled's value; `reload` after writing unit files."""
    if enabled is None:
        raise Refused(f"systemd is not running here: cannot enable {unit} to restore state at boot")
    if enabled == "not-found" and not reload:
        raise Refused(f"{unit} is not installed on this host")
    if enabled == "enabled":
        return f"{unit} is enabled"
    if reload:
        yield sh("systemctl", "daemon-reload")
    yield sh("systemctl", "enable", unit)
    return None
