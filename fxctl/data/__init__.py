"""Files fxctl installs on hosts (scripts and systemd units), read with importlib.resources."""

from importlib.resources import files


def text(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")
