"""Plans: operations are generators that yield commands (or return why nothing is needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generator, Iterable

from fxctl.remote.command import Command

Operation = Generator[Command, None, "str | None"]


@dataclass
class Step:
    """One named operation on one host: the commands it needs, or the reason it needs none."""

    name: str
    commands: list[Command] = field(default_factory=list)
    reason: str = ""
    destructive: bool = False

    @property
    def changes(self) -> bool:
        return bool(self.commands)

    def to_dict(self, verbose: bool = True) -> dict:
        out = {"step": self.name, "changes": self.changes, "reason": self.reason}
        if verbose:
            out["commands"] = [c.masked() for c in self.commands]
        return out


@dataclass
class HostPlan:
    host: str
    steps: list[Step] = field(default_factory=list)
    error: str | None = None

    @property
    def pending(self) -> list[Step]:
        return [s for s in self.steps if s.changes]


def run_operation(name: str, operation: Operation, destructive: bool = False) -> Step:
    """Drain an operation generator into a Step; its return value is the 'nothing to do' reason."""
    commands: list[Command] = []
    while True:
        try:
            commands.append(next(operation))
        except StopIteration as stop:
            reason = stop.value or ("" if commands else "already as desired")
            return Step(name, commands, reason, destructive)


def plan_steps(operations: Iterable[tuple[str, Callable[[], Operation]]]) -> list[Step]:
    """Build steps from (name, operation factory) pairs, in order."""
    return [run_operation(name, factory()) for name, factory in operations]
