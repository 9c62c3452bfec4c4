"""Facts: a command that reads state, and a pure parser of its output (golden-tested on real output)."""

from __future__ import annotations

from collections.abc import Container
from typing import Any, ClassVar

from fxctl.errors import FxError
from fxctl.remote.command import Command


class FactError(FxError):
    """A fact's command failed in a way its parser does not accept."""


# ok_codes of a probe whose failure is itself the answer (the parser turns any exit code into a value)
ANY_EXIT = range(256)


class Fact:
    """Subclass with `command()` and a pure `parse(stdout)`; list in `ok_codes` the exit codes whose
    output is meaningful (e.g. `test -e` or `grep` that may exit 1)."""

    ok_codes: ClassVar[Container[int]] = (0,)
    sudo: ClassVar[bool | None] = None

    def command(self) -> Command:
        raise NotImplementedError

    def parse(self, stdout: str, exit_code: int = 0) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def gather_facts(machine, facts: dict[str, Fact], timeout: float = 60) -> dict[str, Any]:
    """Run every fact on the machine (fxctl.remote.machine: a host over SSH or this one) and parse it;
    FactError names the host, fact and output tail. The facts go to the host together
    (fxctl.engine.fact_batch: one command per sudo setting, not one per fact)."""
    values: dict[str, Any] = {}
    results = read_facts(machine, facts, timeout)
    for name, fact in facts.items():
        result = results[name]
        if result.exit_code not in fact.ok_codes:
            raise FactError(f"{machine.name}: reading fact {name} failed: {result.describe_failure()}")
        try:
            values[name] = fact.parse(result.stdout, result.exit_code)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise FactError(f"{machine.name}: cannot parse fact {name} ({type(fact).__name__}): {exc}",
                            "this host's tool prints a format fxctl does not know; please report it "
                            "with the output in the run journal") from None
    return values


def read_facts(machine, facts: dict[str, Fact], timeout: float) -> dict[str, Any]:
    """Each fact's RunResult; facts that share a sudo setting are sent as one batch."""
    from fxctl.engine.fact_batch import run_batch

    groups: dict[bool | None, list[str]] = {}
    for name, fact in facts.items():
        groups.setdefault(fact.sudo, []).append(name)
    results = {}
    for sudo, names in groups.items():
        answers = run_batch(machine, [facts[n].command() for n in names], timeout, sudo)
        results.update(zip(names, answers))
    return results
