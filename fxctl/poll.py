"""The one poll loop of fxctl's own processes: ask until there is an answer or time runs out.

(The scripts fxctl ships to hosts, fxctl/data/*.py, run there without fxctl and keep their own loops.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(ask: Callable[[], T | None], timeout_s: float, *, every_s: float = 1.0) -> T | None:
    """ask() until it returns something other than None (returned at once) or timeout_s has passed (None),
    sleeping every_s between tries; ask is always tried at least once, and once more at the deadline. ask
    raises to give up early (a process that exited, an error it read)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = ask()
        if answer is not None:
            return answer
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(every_s, left))


def until(condition: Callable[[], bool], timeout_s: float, *, every_s: float = 1.0) -> bool:
    """condition() polled until true (True) or timeout_s has passed (False)."""
    return poll(lambda: True if condition() else None, timeout_s, every_s=every_s) is not None
