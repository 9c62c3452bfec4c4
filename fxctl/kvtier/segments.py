"""L2's data files: large segment files preallocated with fallocate, read and written with O_DIRECT.

Chunks are laid out on 64 KiB page boundaries, so every request is aligned. Where the filesystem
refuses O_DIRECT (tmpfs), I/O falls back to the page cache and says so once.
"""

from __future__ import annotations

import logging
import os
import re

from fxctl.kvtier.buffers import direct_io_supported

log = logging.getLogger(__name__)

SEGMENT_NAME = re.compile(r"^segment\.(\d{5})$")


class SegmentFiles:
    """The segment files of one L2 directory: segment i is `segment.0000i`, `segment_bytes` long."""

    def __init__(self, directory: str, segment_bytes: int, direct_io: bool = True,
                 max_request_bytes: int = 64 * 1024 * 1024):
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.max_request_bytes = max_request_bytes
        self.direct = bool(direct_io) and direct_io_supported(directory)
        if direct_io and not self.direct:
            log.warning("kvtier: %s does not support O_DIRECT (tmpfs?); L2 goes through the page cache",
                        directory)
        self._fds: dict[int, int] = {}

    def _flags(self) -> int:
        return os.O_RDWR | (os.O_DIRECT if self.direct else 0)

    def _path(self, seg: int) -> str:
        return os.path.join(self.directory, f"segment.{seg:05d}")

    def open_existing(self) -> list[int]:
        """Open every segment file already in the directory; returns their numbers."""
        found = []
        for name in sorted(os.listdir(self.directory)):
            m = SEGMENT_NAME.match(name)
            if not m:
                continue
            seg = int(m.group(1))
            path = self._path(seg)
            if os.path.getsize(path) < self.segment_bytes:
                # an interrupted preallocation: nothing in it was ever committed
                os.unlink(path)
                log.warning("kvtier: removed short segment file %s", path)
                continue
            self._fds[seg] = os.open(path, self._flags())
            found.append(seg)
        return found

    def create(self, seg: int) -> None:
        """Create and preallocate segment `seg`; OSError (ENOSPC ...) leaves no file behind."""
        path = self._path(seg)
        fd = os.open(path, self._flags() | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, self.segment_bytes)
        except OSError:
            os.close(fd)
            os.unlink(path)
            raise
        self._fds[seg] = fd

    def segments(self) -> list[int]:
        return sorted(self._fds)

    def read_into(self, seg: int, offset: int, buf: memoryview) -> None:
        """Fill buf from the segment at offset (pieces of at most max_request_bytes); OSError on failure."""
        fd = self._fds[seg]
        done, total = 0, len(buf)
        while done < total:
            piece = buf[done:done + self.max_request_bytes]
            n = os.preadv(fd, [piece], offset + done)
            if n <= 0:
                raise OSError(5, f"short read from segment {seg} at {offset + done}")
            done += n

    def write_from(self, seg: int, offset: int, buf: memoryview) -> None:
        fd = self._fds[seg]
        done, total = 0, len(buf)
        while done < total:
            piece = buf[done:done + self.max_request_bytes]
            n = os.pwritev(fd, [piece], offset + done)
            if n <= 0:
                raise OSError(28, f"short write to segment {seg} at {offset + done}")
            done += n

    def sync(self, segs: set[int]) -> None:
        for seg in segs:
            os.fdatasync(self._fds[seg])

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
