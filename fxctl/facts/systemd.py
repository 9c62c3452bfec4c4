"""Facts of systemd units."""

from __future__ import annotations

from fxctl.engine.fact import Fact
from fxctl.remote.command import script

NO_SYSTEMD = 3


class UnitEnabled(Fact):
    """`systemctl is-enabled UNIT`: 'enabled', 'disabled', 'not-found' ...; None where systemd is absent."""

    ok_codes = (0, 1, 4, NO_SYSTEMD)

    def __init__(self, unit: str):
        self.unit = unit

    def command(self):
        return script('command -v systemctl >/dev/null || exit 3; systemctl is-enabled "$1" 2>/dev/null '
                      '|| { s=$?; systemctl cat "$1" >/dev/null 2>&1 || echo not-found; exit $s; }', self.unit)

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        if exit_code == NO_SYSTEMD:
            return None
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        return lines[-1] if lines else "not-found"


class UnitActive(Fact):
    """`systemctl is-active UNIT`: True when it runs; None where systemd is absent."""

    ok_codes = (0, 1, 2, 3, 4, NO_SYSTEMD + 100)

    def __init__(self, unit: str):
        self.unit = unit

    def command(self):
        return script('command -v systemctl >/dev/null || exit 103; systemctl is-active "$1" 2>/dev/null', self.unit)

    def parse(self, stdout: str, exit_code: int = 0) -> bool | None:
        if exit_code == NO_SYSTEMD + 100:
            return None
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        return bool(lines) and lines[-1] in ("active", "reloading", "activating")
