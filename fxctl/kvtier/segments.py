"""L2's data files: large segment files preallocated with fallocate, read and written with O_DIRECT.

Chunks are laid out on 64 KiB page boundaries, so every request is aligned. Where the filesystem
refuses O_DIRECT, I/O falls back to the page cache and says so once.

Request size follows who moves the bytes. On a block device with O_DIRECT the device DMAs a chunk into
its buffer: one request per chunk (up to max_request_bytes) keeps the device's queue full, and the checksum
reads the chunk afterwards. Where the CPU copies (no block device behind the files, as on tmpfs, or the
page cache without O_DIRECT) a chunk moves in pieces of piece_bytes, each checksummed right after its read
(or before its write) while it is still in the CPU's cache: on tmpfs here, 1 MiB pieces with the checksum
beside them took 0.15 CPU s/GB where a whole 32 MiB request and a checksum after it took 0.20-0.25.
"""

from __future__ import annotations

import logging
import os
import re

from fxctl.kvtier.buffers import direct_io_supported
from fxctl.kvtier.config import REQUEST_ALIGN

log = logging.getLogger(__name__)

SEGMENT_NAME = re.compile(r"^segment\.(\d{5})$")


def on_block_device(path: str) -> bool:
    """True if the filesystem holding path sits on a block device (its device number has a major): the
    device then DMAs O_DIRECT requests. tmpfs, ramfs and network filesystems have major 0; so do overlayfs and
    btrfs (anonymous device numbers) even over a disk: there L2 moves in pieces, correct but without whole-chunk
    requests (put L2 on the array's own mount, as `fxctl provision` makes it: XFS on md)."""
    return os.major(os.stat(path).st_dev) != 0


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which a container's cpuset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class SegmentFiles:
    """The segment files of one L2 directory: segment i is `segment.0000i`, `segment_bytes` long."""

    def __init__(self, directory: str, segment_bytes: int, direct_io: bool = True,
                 max_request_bytes: int = 64 * 1024 * 1024, piece_bytes: int = 1024 * 1024):
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.direct = bool(direct_io) and direct_io_supported(directory)
        if direct_io and not self.direct:
            log.warning("kvtier: %s does not support O_DIRECT; L2 goes through the page cache", directory)
        self.cpu_copies = not (self.direct and on_block_device(directory))
        self.request_bytes = max(REQUEST_ALIGN, piece_bytes if self.cpu_copies else max_request_bytes)
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

    def read_into(self, seg: int, offset: int, buf: memoryview, digest=None, digest_bytes: int = 0) -> None:
        """Fill buf from the segment at offset, in requests of request_bytes; OSError on failure.
        digest (update(bytes)), if given, is fed buf's first digest_bytes."""
        fd = self._fds[seg]
        done, total = 0, len(buf)
        while done < total:
            piece = buf[done:done + self.request_bytes]
            n = os.preadv(fd, [piece], offset + done)
            if n <= 0:
                raise OSError(5, f"short read from segment {seg} at {offset + done}")
            if digest is not None and done < digest_bytes:
                digest.update(piece[:min(n, digest_bytes - done)])
            done += n

    def write_from(self, seg: int, offset: int, buf: memoryview, digest=None, digest_bytes: int = 0) -> None:
        """Write buf to the segment at offset, in requests of request_bytes; OSError on failure.
        digest, if given, is fed buf's first digest_bytes, each piece just before it is written."""
        fd = self._fds[seg]
        for start in range(0, len(buf), self.request_bytes):
            piece = buf[start:start + self.request_bytes]
            if digest is not None and start < digest_bytes:
                digest.update(piece[:digest_bytes - start])
            done = 0
            while done < len(piece):
                n = os.pwritev(fd, [piece[done:]], offset + start + done)
                if n <= 0:
                    raise OSError(28, f"short write to segment {seg} at {offset + start + done}")
                done += n

    def sync(self, segs: set[int]) -> None:
        for seg in segs:
            os.fdatasync(self._fds[seg])

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
