"""Chunk checksums: xxh3-64 where the `xxhash` package is installed (about 20 GB/s a core, GIL released),
zlib's crc32 otherwise (about 3 GB/s a core: with two cores it costs a third of the read bandwidth).

Each journal record names the algorithm it used, so a store written with one still verifies with it.
"""

from __future__ import annotations

import zlib

CRC32, XXH3 = 1, 2
NAMES = {CRC32: "crc32", XXH3: "xxh3_64"}

try:
    import xxhash as _xxhash
except ImportError:  # pragma: no cover - depends on the environment
    _xxhash = None


def default_algorithm() -> int:
    return XXH3 if _xxhash is not None else CRC32


def available(algorithm: int) -> bool:
    return algorithm == CRC32 or (algorithm == XXH3 and _xxhash is not None)


class Digest:
    """A checksum fed piece by piece (each piece right after its read or before its write, while it is in
    the CPU's cache); its value equals checksum() over the pieces joined."""

    __slots__ = ("algorithm", "_state")

    def __init__(self, algorithm: int):
        if algorithm not in NAMES:
            raise ValueError(f"unknown checksum algorithm {algorithm}")
        self.algorithm = algorithm
        self._state = _xxhash.xxh3_64() if algorithm == XXH3 else 0

    def update(self, data) -> None:
        if self.algorithm == XXH3:
            self._state.update(data)
        else:
            self._state = zlib.crc32(data, self._state)

    def value(self) -> int:
        return self._state.intdigest() if self.algorithm == XXH3 else self._state


def checksum(algorithm: int, data) -> int:
    if algorithm == XXH3:
        return _xxhash.xxh3_64_intdigest(data)
    if algorithm == CRC32:
        return zlib.crc32(data)
    raise ValueError(f"unknown checksum algorithm {algorithm}")
