"""Running the real CLI entry point (fxctl.cli.main: the error boundary and exit codes) in a test."""

from __future__ import annotations

import pytest


def run_main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `fxctl ARGS`, with FXCTL_INVENTORY unset."""
    from fxctl.cli import main

    monkeypatch.delenv("FXCTL_INVENTORY", raising=False)
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err
