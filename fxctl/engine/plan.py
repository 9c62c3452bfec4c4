"""Plans: operations are generators that yield commands (or return why nothing is needed)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from fxctl.remote.command import Command

Operation = Generator[Command, None, "str | None"]


@dataclass
class Step:
    """One named operation on one host: the commands it needs, or the reason it needs none."""

    name: str
    commands: list[Command] = field(default_factory=list)
    reason: str = ""
    destructive: bool = False
    refusal: str = ""      # set when reaching the desired state would need something not allowed

    @classmethod
    def refuse(cls, name: str, why: str) -> Step:
        return cls(name, [], "", False, why)

    @property
    def changes(self) -> bool:
        return bool(self.commands)


class Refused(Exception):
    """Raised inside an operation: the desired state can't be reached without consent (e.g. data)."""


def run_operation(name: str, operation: Operation, destructive: bool = False) -> Step:
    """Drain an operation generator into a Step; its return value is the 'nothing to do' reason.
    An operation that raises Refused becomes a refusing step: the host's plan is not applied."""
    commands: list[Command] = []
    while True:
        try:
            commands.append(next(operation))
        except Refused as refusal:
            return Step.refuse(name, str(refusal))
        except StopIteration as stop:
            reason = stop.value or ("" if commands else "already as desired")
            return Step(name, commands, reason, destructive)
