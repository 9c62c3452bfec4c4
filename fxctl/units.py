"""Units of size, declared once: binary multiples for bytes on disks and in memory, the decimal GB that
profiles use (vendors' datasheets), and the one parser of sizes written by people ("64K", "8GiB", "1.5G")."""

from __future__ import annotations

import re
from typing import Any

from fxctl.errors import BadInput

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
PIB = 1 << 50
GB = 1e9   # decimal: profiles' sizes and bandwidths (GB, GB/s) as datasheets give them

BINARY = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": TIB, "P": PIB}
SIZE_RE = re.compile(r"\s*([0-9]+(\.[0-9]+)?)\s*([KMGTP]?)(i?B)?\s*", re.IGNORECASE)


def parse_size(value: Any) -> int | None:
    """Bytes from 65536, '64K', '64KiB', '2TiB', '1.5G' (binary units: K = 1024); None if malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if not isinstance(value, str):
        return None
    match = SIZE_RE.fullmatch(value)
    if not match:
        return None
    return int(float(match.group(1)) * BINARY[match.group(3).upper()])


def size_bytes(value: Any, what: str = "size") -> int:
    """parse_size for command-line values: BadInput naming `what` when malformed."""
    parsed = parse_size(value)
    if parsed is None:
        raise BadInput(f"cannot read {what} {value!r}", "write it like 256M, 1G, 512MiB or 1.5G (K = 1024)")
    return parsed
