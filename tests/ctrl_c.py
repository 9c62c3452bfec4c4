"""For tests that press Ctrl-C on a child process."""

from __future__ import annotations

import signal


def sigint_as_in_a_terminal() -> None:
    """preexec_fn: SIGINT at its default in the child. A test run a shell without job control started in the
    background ignores SIGINT, and a child inherits that: it would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
