"""Progress while hosts answer: one line on stderr, redrawn in place on a terminal, periodic otherwise.

Every fan-out through fxctl.remote.pool is a wave: `hosts answered 37/64, 2 failed (4.1 s)`. The CLI
installs a display for the whole command (`show_progress`); the library prints nothing by itself, and
stdout (tables, `-o json`) is never touched. On a terminal the line is redrawn as hosts answer and erased
when the wave ends; on a pipe or file a plain line is written every `every_s` seconds of a long wave, and
one closing line after it. click.progressbar was not enough: it prints nothing periodic when not on a
terminal and counts no failures.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

DRAW_AFTER_S = 0.3      # a terminal line appears only for waves that last longer (no flicker on fast ones)
PLAIN_EVERY_S = 10.0    # a pipe gets a line this often while a wave runs


class Wave:
    """The answers of one fan-out; `answered` is called from the pool's worker threads."""

    def __init__(self, total: int, stream: TextIO, *, tty: bool, every_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.stream, self.tty, self.every_s, self.clock = total, stream, tty, every_s, clock
        self.done = self.failed = 0
        self.started = clock()
        self.drawn = False          # a terminal line is on screen
        self.lines = 0              # plain lines written
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def text(self) -> str:
        return (f"hosts answered {self.done}/{self.total}, {self.failed} failed "
                f"({self.clock() - self.started:.1f} s)")

    def start(self) -> Wave:
        """Tick in the background, so a wave where no host answers for a while still shows it is alive."""
        self._ticker = threading.Thread(target=self._tick, name="fxctl-progress", daemon=True)
        self._ticker.start()
        return self

    def _tick(self) -> None:
        period = 0.2 if self.tty else self.every_s
        while not self._stop.wait(period):
            self.show()

    def answered(self, ok: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += 0 if ok else 1
        if self.tty:
            self.show()

    def show(self) -> None:
        """Draw now: in place on a terminal (once the wave is old enough), a plain line otherwise."""
        with self._lock:
            elapsed = self.clock() - self.started
            if self.tty and elapsed >= DRAW_AFTER_S:
                self._write("\r\x1b[K" + self.text())
                self.drawn = True
            elif not self.tty and elapsed >= self.every_s * (self.lines + 1):
                self._write(self.text() + "\n")
                self.lines += 1

    def close(self) -> None:
        """Stop ticking; erase the terminal line, or end a long plain wave with its final count."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.drawn:
                self._write("\r\x1b[K")
            elif self.lines:
                self._write(self.text() + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not fail the run
            pass


class Display:
    """Makes a Wave for each fan-out, all on one stream."""

    def __init__(self, stream: TextIO, *, tty: bool | None = None, every_s: float = PLAIN_EVERY_S):
        self.stream, self.every_s = stream, every_s
        self.tty = stream.isatty() if tty is None else tty

    def wave(self, total: int) -> Wave:
        return Wave(total, self.stream, tty=self.tty, every_s=self.every_s).start()


class Silent:
    """No display: what the library gets unless a caller installed one."""

    def wave(self, total: int) -> SilentWave:
        return SilentWave()


class SilentWave:
    def answered(self, ok: bool) -> None:
        pass

    def close(self) -> None:
        pass


SILENT = Silent()
_current: contextvars.ContextVar = contextvars.ContextVar("fxctl_hosts_display", default=None)


def current():
    """The display fan-outs report to (silent unless inside `show_progress`)."""
    return _current.get() or SILENT


@contextlib.contextmanager
def show_progress(display=None) -> Iterator[None]:
    """Report every fan-out inside the block to `display` (default: a Display on stderr)."""
    token = _current.set(display if display is not None else Display(sys.stderr))
    try:
        yield
    finally:
        _current.reset(token)
