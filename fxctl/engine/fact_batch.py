"""Facts read together: one command carries several fact commands to a host and brings back each one's exit
code, stdout and stderr, as if each had been run alone.

A command over SSH costs about 0.1-0.15 s before it does anything (a session channel, sshd's fork, a shell):
a converged provision of one initiator read 60 facts, so most of its time was that overhead. The batch is a
constant script (`script`): each fact command is one quoted argument, run by `sh -c` under `timeout`, its
outputs in base64 on one marker line, so any bytes come back intact. Each fact is recorded in the run
journal as its own command, with its own exit code and output, as when it ran alone.
"""

from __future__ import annotations

import base64
import time

from fxctl.remote.command import AsArgument, Command, script
from fxctl.remote.session import RunResult, journal_result

MARK = "@@fxctl-fact"
TIMED_OUT = 124   # timeout(1)'s exit code, as the session reports a timeout
BATCH = f"""t=$(mktemp -d) || exit 125
trap 'rm -rf "$t"' EXIT
limit=$1; shift
for c in "$@"; do
  timeout "$limit" sh -c "$c" >"$t/o" 2>"$t/e" </dev/null
  rc=$?
  printf '{MARK}:%s:%s:%s\\n' "$rc" "$(base64 -w0 <"$t/o")" "$(base64 -w0 <"$t/e")"
done
"""


def batch_command(commands: list[Command], timeout: float) -> Command:
    return script(BATCH, max(1, int(timeout)), *[AsArgument(c) for c in commands],
                  description=f"{len(commands)} facts")


def parse_batch(stdout: str, count: int) -> list[tuple[int, str, str]] | None:
    """(exit code, stdout, stderr) of each command, or None when the batch did not report all of them."""
    found = []
    for line in stdout.splitlines():
        if not line.startswith(MARK + ":"):
            continue
        try:
            _, code, out, err = line.split(":")
            found.append((int(code), base64.b64decode(out, validate=True).decode(errors="replace"),
                          base64.b64decode(err, validate=True).decode(errors="replace")))
        except ValueError:
            return None
    return found if len(found) == count else None


def run_batch(machine, commands: list[Command], timeout: float, sudo: bool | None) -> list[RunResult]:
    """Every command's RunResult; one command alone is run as it is. A batch that did not report back
    (no mktemp, base64 or timeout on the host) is run again one command at a time."""
    if len(commands) == 1:
        return [machine.run(commands[0], timeout=timeout, sudo=sudo)]
    started = time.monotonic()
    sent = batch_command(commands, timeout)
    whole = machine.run(sent, timeout=timeout * len(commands), sudo=sudo, record=False)
    answers = parse_batch(whole.stdout, len(commands)) if not whole.timed_out else None
    if answers is None:
        return [machine.run(c, timeout=timeout, sudo=sudo) for c in commands]
    each = (time.monotonic() - started) / len(commands)
    results = [RunResult(whole.host, c.masked(), code, out, err, each, code == TIMED_OUT)
               for c, (code, out, err) in zip(commands, answers)]
    journal = getattr(machine, "journal", None)
    if journal:
        for command, result in zip(commands, results):
            journal_result(journal, result, command, batched=len(commands))
    return results
