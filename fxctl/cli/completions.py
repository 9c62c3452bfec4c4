"""Shell completion scripts generated from the click app: `python -m fxctl.cli.completions [DIR]`."""

from __future__ import annotations

import sys
from pathlib import Path

from click.shell_completion import get_completion_class

SHELLS = {"bash": "fxctl.bash", "zsh": "_fxctl", "fish": "fxctl.fish"}


def completion_script(shell: str) -> str:
    from fxctl.cli import cli

    cls = get_completion_class(shell)
    return cls(cli, {}, "fxctl", "_FXCTL_COMPLETE").source()


def write_all(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in SHELLS.items():
        path = folder / name
        path.write_text(completion_script(shell))
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "completions"
    for written_path in write_all(target):
        print(written_path)
