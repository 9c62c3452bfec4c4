"""Page-aligned DRAM buffers for O_DIRECT, and a probe for whether a directory allows O_DIRECT.

Anonymous mmap memory is page aligned; for buffers of 2 MiB and more we ask for transparent huge
pages, so one large read is a few physically contiguous segments (the virtio queue takes at most
254 segments per request: 4 KiB pages would cap a request at about 1 MiB).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import threading
from collections import defaultdict

log = logging.getLogger(__name__)

ALIGN = 4096
HUGE = 2 * 1024 * 1024


def aligned_buffer(nbytes: int) -> memoryview:
    """A zero-filled, page-aligned, writable buffer of nbytes (huge pages when large)."""
    size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
    mem = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if size >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mem.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    return memoryview(mem)[:nbytes] if nbytes else memoryview(mem)[:0]


def address_of(buf: memoryview) -> int:
    """The address of a writable buffer's first byte (-1 for read-only or empty buffers)."""
    if buf.readonly or len(buf) == 0:
        return -1
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def is_aligned(buf: memoryview, align: int = ALIGN) -> bool:
    addr = address_of(buf)
    return addr >= 0 and addr % align == 0


class BufferPool:
    """Recycles aligned buffers by size, so hot paths do not mmap and fault in pages each time.

    Keeps at most `keep_bytes` of idle buffers; the rest go back to the kernel. A store keeps as many as its
    write-behind queue can hold, so a steady stream of puts copies into memory already faulted in.
    """

    DEFAULT_KEEP_BYTES = 256 * 1024 * 1024

    def __init__(self, keep_bytes: int = DEFAULT_KEEP_BYTES):
        self.keep_bytes = keep_bytes
        self._idle: dict[int, list[memoryview]] = defaultdict(list)
        self._idle_bytes = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> memoryview:
        with self._lock:
            idle = self._idle.get(nbytes)
            if idle:
                self._idle_bytes -= nbytes
                return idle.pop()
        return aligned_buffer(nbytes)

    def give(self, buf: memoryview) -> None:
        nbytes = len(buf)
        with self._lock:
            if self._idle_bytes + nbytes <= self.keep_bytes:
                self._idle[nbytes].append(buf)
                self._idle_bytes += nbytes

    def idle_bytes(self) -> int:
        return self._idle_bytes


def direct_io_supported(directory: str) -> bool:
    """True if files in `directory` accept O_DIRECT reads and writes (tmpfs does not)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    probe = os.path.join(directory, f".odirect-probe-{os.getpid()}-{threading.get_ident()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
    except OSError:
        return False
    try:
        buf = aligned_buffer(ALIGN)
        os.pwritev(fd, [buf], 0)
        os.preadv(fd, [buf], 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            pass
