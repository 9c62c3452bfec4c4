"""Many hosts at once on a bounded pool: every host gets an outcome, whatever the others do."""

from __future__ import annotations

import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from fxctl.errors import FxError
from fxctl.inventory.model import Host
from fxctl.remote import progress
from fxctl.remote.journal import RunJournal
from fxctl.remote.machine import LOCAL, LocalMachine
from fxctl.remote.session import HostSession, open_session

T = TypeVar("T")
DEFAULT_WORKERS = 16


@dataclass
class HostOutcome(Generic[T]):
    host: str
    ok: bool
    value: T | None = None
    error: str | None = None
    hint: str | None = None
    duration_s: float = 0.0


def outcome_of(name: str, call: Callable[[], T]) -> HostOutcome[T]:
    """call()'s value or its failure as this place's outcome: an FxError with its message, hint and partial
    value; anything else (a bug) as an internal error, so that one place never loses the others."""
    start = time.monotonic()
    try:
        outcome = HostOutcome(name, True, value=call())
    except FxError as exc:
        outcome = HostOutcome(name, False, value=exc.partial, error=exc.message, hint=exc.hint)
    except Exception as exc:  # a bug on one host must not lose the others
        outcome = HostOutcome(name, False, error=f"internal error: {exc!r}",
                              hint=traceback.format_exc(limit=3).strip().splitlines()[-1])
    outcome.duration_s = time.monotonic() - start
    return outcome


def run_here(work: Callable, *, journal: RunJournal | None = None) -> dict[str, HostOutcome]:
    """work(machine) on this machine, its outcome kept as run_on_hosts keeps a host's."""
    return {LOCAL: outcome_of(LOCAL, lambda: work(LocalMachine(journal)))}


def run_on_hosts(hosts: list[Host], work: Callable[[HostSession], T], *,
                 journal: RunJournal | None = None, max_workers: int = DEFAULT_WORKERS,
                 on_done: Callable[[HostOutcome], Any] | None = None) -> dict[str, HostOutcome[T]]:
    """Connect to each host and call `work(session)`; the result dict has every host, in input order.
    Each answer is reported to the progress display the caller installed (fxctl.remote.progress)."""

    def one(host: Host) -> HostOutcome[T]:
        def connected() -> T:
            with open_session(host, journal=journal) as session:
                return work(session)

        outcome = outcome_of(host.name, connected)
        wave.answered(outcome.ok)
        if on_done:
            on_done(outcome)
        return outcome

    if not hosts:
        return {}
    wave = progress.current().wave(len(hosts))
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(hosts)))) as pool:
            outcomes = list(pool.map(one, hosts))
    finally:
        wave.close()
    return {o.host: o for o in outcomes}
