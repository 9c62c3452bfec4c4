"""Facts about files on a host."""

from __future__ import annotations

import base64

from fxctl.engine.fact import Fact
from fxctl.remote.command import Raw, sh

MISSING = 3  # exit code of the probe when the file does not exist


class FileContent(Fact):
    """The content of a file (base64 in transit, so any bytes survive), or None when it is missing."""

    ok_codes = (0, MISSING)

    def __init__(self, path: str):
        self.path = path

    def command(self):
        exists = sh("test", "-e", self.path)
        return sh(exists, Raw("||"), "exit", MISSING, Raw(";"), "base64", "-w0", self.path)

    def parse(self, stdout: str, exit_code: int = 0) -> str | None:
        if exit_code == MISSING:
            return None
        return base64.b64decode(stdout.strip()).decode("utf-8", errors="surrogateescape")
