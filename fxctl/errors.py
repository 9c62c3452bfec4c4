"""The one vocabulary of failure: domain errors and the process exit codes they map to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of every fxctl command (documented in docs/exit-codes.md)."""

    OK = 0
    HOST_FAILED = 1        # at least one host (or step, or gate) failed
    BAD_INPUT = 2          # bad inventory, profile, argument or usage; nothing was executed
    CHANGES_PENDING = 3    # --check found changes that apply would make
    NOT_CONVERGED = 4      # apply ran, but gathering facts again still plans changes
    NOT_IMPLEMENTED = 5    # the command exists but its feature is not built yet
    SLO_NOT_MET = 6        # the measurements ran, and no point met the SLO (fxctl tune)
    INTERRUPTED = 130      # Ctrl-C


class FxError(Exception):
    """An error the user can act on: one line of message, one line of hint. `partial`: what the work had
    found before it failed (a pre-flight's checks), kept in that host's outcome by the fan-outs."""

    exit_code: ExitCode = ExitCode.HOST_FAILED
    partial: object = None

    def __init__(self, message: str, hint: str | None = None, *, exit_code: ExitCode | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class BadInput(FxError):
    """Input that fxctl refuses before running anything."""

    exit_code = ExitCode.BAD_INPUT


class NotImplementedYet(FxError):
    exit_code = ExitCode.NOT_IMPLEMENTED


class RemoteError(FxError):
    """A host could not be reached or refused us (host key, auth, timeout)."""

    exit_code = ExitCode.HOST_FAILED


class HostKeyRefused(RemoteError):
    """The host offered an SSH key that is not the one trusted (changed, wrong or unknown): never retried."""
