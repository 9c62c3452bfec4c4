"""Facts per domain: each a command plus a pure parser, golden-tested on real output."""

from __future__ import annotations


def export_sections(stdout: str) -> dict[str, dict[str, str]]:
    """Parse '## NAME' headers each followed by KEY=VALUE lines (blkid/mdadm --export output per device)."""
    found: dict[str, dict[str, str]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = {}
        elif current and "=" in line:
            key, _, value = line.partition("=")
            found[current][key] = value
    return found
