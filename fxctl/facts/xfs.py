"""Facts of XFS: the geometry xfs_info reports for a mounted filesystem."""

from __future__ import annotations

import re

from fxctl.engine.fact import Fact
from fxctl.remote.command import sh

_FIELD = re.compile(r"(\w+)=(\d+)")


class XfsGeometry(Fact):
    """xfs_info of a mount point: bsize, sunit, swidth (in filesystem blocks), agcount; None if not XFS."""

    ok_codes = (0, 1)

    def __init__(self, mount: str):
        self.mount = mount

    def command(self):
        return sh("xfs_info", self.mount)

    def parse(self, stdout: str, exit_code: int = 0) -> dict | None:
        if exit_code != 0:
            return None
        geometry: dict[str, int] = {}
        section = None
        for line in stdout.splitlines():
            head = line.split("=", 1)[0].strip()
            if head in ("meta-data", "data", "naming", "log", "realtime"):
                section = head
            for key, value in _FIELD.findall(line):
                if section == "data" and key in ("bsize", "blocks", "sunit", "swidth"):
                    geometry[key] = int(value)
                elif section == "meta-data" and key in ("agcount", "agsize"):
                    geometry[key] = int(value)
        return geometry
