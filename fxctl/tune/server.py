"""The server under tuning as a process: `fxctl sim serve` in its own session, health-polled, stopped as a group.

Start: a new session (its own process group), read the `listening on URL` line, poll /health while
watching for a crash. Stop: SIGTERM to the group, SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from fxctl.errors import FxError

# the folder holding the fxctl this process imported (a checkout or site-packages): the server imports the same
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (http://\S+)")


class ServerProcess:
    def __init__(self, argv: list[str], log_path: Path | None = None, start_timeout_s: float = 60.0):
        self.argv = argv
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.output: list[str] = []

    def start(self) -> str:
        env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1)
                threading.Thread(target=self._drain, daemon=True).start()
                self._wait_healthy(deadline)
                return self.url
        self.stop()
        raise FxError(f"the server did not start: {' '.join(self.argv)}",
                      "its output: " + "".join(self.output[-5:]).strip())

    def _drain(self) -> None:
        log = open(self.log_path, "a") if self.log_path else None
        try:
            for line in self.proc.stdout:
                if log:
                    log.write(line)
        finally:
            if log:
                log.close()

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise FxError(f"the server exited with {self.proc.returncode}", "".join(self.output[-5:]))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise FxError("the server never answered /health", self.url)

    def stop(self, grace_s: float = 10.0) -> None:
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def sim_argv(profile: str, time_scale: float, offload: bool | None = None, port: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "fxctl", "sim", "serve", "--profile", profile, "--host", "127.0.0.1",
            "--port", str(port), "--time-scale", repr(time_scale)]
    if offload is not None:
        argv.append("--offload" if offload else "--no-offload")
    return argv
