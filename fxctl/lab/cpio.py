"""Writing a Linux initramfs (cpio "newc") from a tar archive, keeping owners, modes and devices.

mmdebstrap writes a tar with the right owners whether it ran as root or in a user namespace; turning
that tar into cpio here keeps the build free of root-only steps.
"""

from __future__ import annotations

import stat
import tarfile
from typing import BinaryIO

TRAILER = "TRAILER!!!"
_CHUNK = 1 << 20


def newc_header(*, ino: int, mode: int, uid: int, gid: int, nlink: int, mtime: int, size: int,
                rdev_major: int, rdev_minor: int, name: str) -> bytes:
    encoded = name.encode() + b"\0"
    fields = (ino, mode, uid, gid, nlink, mtime, size, 0, 0, rdev_major, rdev_minor, len(encoded), 0)
    header = b"070701" + b"".join(b"%08X" % value for value in fields) + encoded
    return header + _pad(len(header))


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)


def _mode(member: tarfile.TarInfo) -> int:
    kinds = {tarfile.DIRTYPE: stat.S_IFDIR, tarfile.SYMTYPE: stat.S_IFLNK, tarfile.CHRTYPE: stat.S_IFCHR,
             tarfile.BLKTYPE: stat.S_IFBLK, tarfile.FIFOTYPE: stat.S_IFIFO}
    return kinds.get(member.type, stat.S_IFREG) | (member.mode & 0o7777)


def _name(member: tarfile.TarInfo) -> str:
    return _name_of(member.name)


def _name_of(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/") or "."


class CpioWriter:
    """Stream newc entries to a binary file object; `close()` writes the trailer."""

    def __init__(self, out: BinaryIO):
        self.out = out
        self.next_ino = 1
        self.names: set[str] = set()

    def add(self, name: str, mode: int, data: bytes = b"", *, uid=0, gid=0, mtime=0, rdev=(0, 0)) -> None:
        self._header(name, mode, len(data), uid, gid, mtime, rdev)
        self.out.write(data + _pad(len(data)))

    def add_stream(self, name: str, mode: int, size: int, stream: BinaryIO, *, uid=0, gid=0, mtime=0) -> None:
        self._header(name, mode, size, uid, gid, mtime, (0, 0))
        left = size
        while left:
            chunk = stream.read(min(_CHUNK, left))
            if not chunk:
                raise ValueError(f"{name}: archive member ended early")
            self.out.write(chunk)
            left -= len(chunk)
        self.out.write(_pad(size))

    def _header(self, name, mode, size, uid, gid, mtime, rdev) -> None:
        nlink = 2 if stat.S_ISDIR(mode) else 1
        self.out.write(newc_header(ino=self.next_ino, mode=mode, uid=uid, gid=gid, nlink=nlink,
                                   mtime=int(mtime), size=size, rdev_major=rdev[0], rdev_minor=rdev[1],
                                   name=name))
        self.next_ino += 1
        self.names.add(name)

    def close(self) -> None:
        self.add(TRAILER, 0)
        self.out.flush()


def tar_to_cpio(tar_path, writer: CpioWriter) -> None:
    """Copy every member of a tar into the cpio stream; hard links become copies of their target."""
    seen: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(tar_path, "r:") as archive:
        for member in archive:
            name = _name(member)
            seen[name] = member
            owner = {"uid": member.uid, "gid": member.gid, "mtime": member.mtime}
            if member.islnk():
                target = seen[_name_of(member.linkname)]
                with archive.extractfile(target) as data:
                    writer.add_stream(name, stat.S_IFREG | (target.mode & 0o7777), target.size, data, **owner)
            elif member.isreg():
                with archive.extractfile(member) as data:
                    writer.add_stream(name, _mode(member), member.size, data, **owner)
            elif member.issym():
                writer.add(name, _mode(member), member.linkname.encode(), **owner)
            elif member.ischr() or member.isblk():
                writer.add(name, _mode(member), rdev=(member.devmajor, member.devminor), **owner)
            else:
                writer.add(name, _mode(member), **owner)
