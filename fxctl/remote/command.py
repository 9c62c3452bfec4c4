"""Shell commands as values: built from parts, each quoted on rendering; secrets masked in logs.

Nothing in fxctl glues strings into a shell line. A `Command` holds argv-like parts; `render()` quotes
every part with `shlex.quote`, except parts that are deliberately shell syntax (`Raw`: operators such as
`>`, `|`, `&&` written by fxctl itself, never by inventory data).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Union

MASK = "***"


@dataclass(frozen=True)
class Secret:
    """A value that must reach the host but never a log or journal."""

    value: str

    def __str__(self) -> str:
        return MASK


@dataclass(frozen=True)
class Raw:
    """Literal shell syntax written by fxctl (an operator or redirection), never inventory data."""

    text: str

    ALLOWED = frozenset({">", ">>", "<", "|", "&&", "||", ";", "2>&1", "2>/dev/null", ">/dev/null",
                         "(", ")", "!", "{", "}"})

    def __post_init__(self):
        if self.text not in self.ALLOWED:
            raise ValueError(f"Raw shell syntax {self.text!r} is not one of the allowed operators")


@dataclass(frozen=True)
class AsArgument:
    """A whole command passed as ONE quoted argument (for `sh -c`, `sudo sh -c`, `systemd-run ...`)."""

    command: "Command"


Part = Union[str, int, float, Secret, Raw, AsArgument, "Command"]


@dataclass(frozen=True)
class Command:
    """A shell command built from quoted parts. Compose with `+`/`then`/`pipe`/`redirect`."""

    parts: tuple[Part, ...]
    description: str = field(default="", compare=False)

    def __post_init__(self):
        for part in self.parts:
            if not isinstance(part, (str, int, float, Secret, Raw, AsArgument, Command)) or isinstance(part, bool):
                raise TypeError(f"command part {part!r} has type {type(part).__name__}")

    def _render(self, reveal: bool) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, Raw):
                out.append(part.text)
            elif isinstance(part, Secret):
                out.append(shlex.quote(part.value) if reveal else MASK)
            elif isinstance(part, Command):
                out.append(part._render(reveal))
            elif isinstance(part, AsArgument):
                out.append(shlex.quote(part.command._render(reveal)))
            else:
                out.append(shlex.quote(str(part)))
        return " ".join(out)

    def secrets(self) -> list[str]:
        """The secret values inside, so that outputs can be masked too."""
        found: list[str] = []
        for part in self.parts:
            if isinstance(part, Secret):
                found.append(part.value)
            elif isinstance(part, Command):
                found += part.secrets()
            elif isinstance(part, AsArgument):
                found += part.command.secrets()
        return found

    def render(self) -> str:
        """The shell line to execute (secrets revealed)."""
        return self._render(reveal=True)

    def masked(self) -> str:
        """The shell line for logs, plans and journals (secrets masked)."""
        return self._render(reveal=False)

    def __str__(self) -> str:
        return self.masked()

    def then(self, other: "Command") -> "Command":
        return Command((self, Raw("&&"), other), self.description)

    def or_else(self, other: "Command") -> "Command":
        return Command((self, Raw("||"), other), self.description)

    def write_to(self, path: str, append: bool = False) -> "Command":
        return Command((self, Raw(">>" if append else ">"), path), self.description)

    def quiet_errors(self) -> "Command":
        return Command((self, Raw("2>/dev/null")), self.description)

    def describe(self, text: str) -> "Command":
        return Command(self.parts, text)


def sh(*parts: Part, description: str = "") -> Command:
    """Build a command: `sh("mdadm", "--detail", "--export", device)`."""
    return Command(tuple(parts), description)


def mask_secrets(text: str, secrets: list[str]) -> str:
    for value in secrets:
        if value:
            text = text.replace(value, MASK)
    return text


def write_file(path: str, content: str, mode: str | None = None) -> Command:
    """Write `content` to `path` atomically on the host (printf + mv), content quoted as one part."""
    tmp = f"{path}.fxctl-tmp"
    cmd = sh("printf", "%s", content).write_to(tmp)
    if mode:
        cmd = cmd.then(sh("chmod", mode, tmp))
    return cmd.then(sh("mv", "-f", tmp, path)).describe(f"write {path}")


def script(body: str, *args: Part, description: str = "") -> Command:
    """A constant shell script written in fxctl's code, with data passed as quoted positional arguments:
    `sh -c BODY fxctl ARG1 ARG2` (inside BODY: "$1", "$2" or "$@"). BODY never holds inventory data."""
    return Command(("sh", "-c", body, "fxctl", *args), description)
