"""The persistent index of L2: an append-only journal of checksummed records plus a checkpointed manifest.

A chunk counts as stored only once its PUT record is in the journal, and that record is written after the
chunk's bytes. A record cut short by a crash fails its checksum: replay stops there and the tail is cut
off, so a restart finds exactly the chunks whose records were whole. Durable stores write the record as
soon as the bytes are written, then fdatasync the bytes and the record (L2Tier.store): a crash of the
process keeps every chunk whose record was written; after a power loss a record may name bytes that did not
reach the disk, and the chunk's checksum turns that read into a counted miss, never other data. Every
`checkpoint` writes the whole index to a new manifest (write, fsync, rename) and starts a new journal
generation.

A manifest is only ever replaced by rename, so one that fails its checks is damage (a bad disk, a stray
write), not a crash. Recovery does not raise on it: it keeps the manifest's records whose own checksums hold
(up to the first damaged one), replays every journal left on disk over them, and says so in
`manifest_damage`; the owner then checkpoints to write a whole manifest again.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass

log = logging.getLogger(__name__)

RECORD_MAGIC = 0x4B565431    # "KVT1"
MANIFEST_MAGIC = 0x4B564D31  # "KVM1"
OP_PUT, OP_DEL = 1, 2

_HEAD = struct.Struct("<III")         # magic, payload length, crc32 of payload
_BODY = struct.Struct("<BBHIIQQHH")   # op, checksum algorithm, segment, page, pages, nbytes, checksum,
                                      # key len, meta len
_MANIFEST_HEAD = struct.Struct("<IIQQI")  # magic, version, generation, records, crc32 of body


@dataclass(slots=True)
class ChunkLocation:
    """Where a stored chunk lives in L2 and how to check it."""

    segment: int
    page: int
    pages: int
    nbytes: int
    crc: int          # checksum of the chunk's nbytes, by `algorithm` (fxctl.kvtier.checksum)
    meta: bytes = b""
    algorithm: int = 1


def encode(op: int, key: str, loc: ChunkLocation | None = None) -> bytes:
    """One whole journal record (header and payload)."""
    kb = key.encode()
    if loc is None:
        payload = _BODY.pack(op, 0, 0, 0, 0, 0, 0, len(kb), 0) + kb
    else:
        payload = _BODY.pack(op, loc.algorithm, loc.segment, loc.page, loc.pages, loc.nbytes, loc.crc,
                             len(kb), len(loc.meta)) + kb + loc.meta
    return _HEAD.pack(RECORD_MAGIC, len(payload), zlib.crc32(payload)) + payload


def decode_all(data: bytes) -> tuple[list[tuple[int, str, ChunkLocation | None]], int]:
    """Records of a journal image and the length of its whole prefix (the rest is a torn tail)."""
    records: list[tuple[int, str, ChunkLocation | None]] = []
    pos, end = 0, len(data)
    view = memoryview(data)
    while pos + _HEAD.size <= end:
        magic, length, crc = _HEAD.unpack_from(data, pos)
        start = pos + _HEAD.size
        if magic != RECORD_MAGIC or start + length > end or length < _BODY.size:
            break
        payload = view[start:start + length]
        if zlib.crc32(payload) != crc:
            break
        op, algo, seg, page, pages, nbytes, ccrc, klen, mlen = _BODY.unpack_from(payload, 0)
        key = bytes(payload[_BODY.size:_BODY.size + klen]).decode()
        if op == OP_PUT:
            meta = bytes(payload[_BODY.size + klen:_BODY.size + klen + mlen])
            records.append((op, key, ChunkLocation(seg, page, pages, nbytes, ccrc, meta, algo)))
        elif op == OP_DEL:
            records.append((op, key, None))
        else:
            break
        pos = start + length
    return records, pos


class Journal:
    """The on-disk index of one L2 directory: `manifest` plus `journal.<generation>`."""

    def __init__(self, directory: str, durable: bool = True):
        self.directory = directory
        self.durable = durable
        self.generation = 0
        self.records_since_checkpoint = 0
        self.torn_bytes = 0
        self.leftovers_removed: list[str] = []
        self.manifest_damage = ""   # why the manifest could not be read whole; "" when it could
        self._fd = -1
        self._length = 0

    # -- opening and recovery -------------------------------------------------------------------
    def recover(self) -> dict[str, ChunkLocation]:
        """Read the manifest and replay the journal; returns the index in insertion order."""
        index: dict[str, ChunkLocation] = {}
        manifest = os.path.join(self.directory, "manifest")
        generations = [self.generation]
        if os.path.exists(manifest):
            self.generation, index = self._read_manifest(manifest)
            generations = [self.generation]
            if self.manifest_damage:  # which journal it named is unknown: replay all, oldest first
                generations = self._journal_generations() or [self.generation]
                self.generation = generations[-1]
        self.records_since_checkpoint = 0
        for generation in generations:
            self._replay(self._journal_path(generation), index)
        self._remove_leftovers()
        self._open_journal()
        return index

    def _replay(self, path: str, index: dict[str, ChunkLocation]) -> None:
        if not os.path.exists(path):
            return
        with open(path, "rb") as f:
            data = f.read()
        records, good = decode_all(data)
        torn = len(data) - good
        if torn:
            log.warning("kvtier journal %s: cut %d bytes of torn tail after %d whole records",
                        path, torn, len(records))
            os.truncate(path, good)
        self.torn_bytes += torn
        for op, key, loc in records:
            index.pop(key, None)
            if op == OP_PUT:
                index[key] = loc
        self.records_since_checkpoint += len(records)

    def _journal_generations(self) -> list[int]:
        names = (n.partition(".")[2] for n in os.listdir(self.directory) if n.startswith("journal."))
        return sorted(int(g) for g in names if g.isdigit())

    def _read_manifest(self, path: str) -> tuple[int, dict[str, ChunkLocation]]:
        """The manifest's generation and index; a damaged one gives what is intact (see the module's doc)."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            return self._damaged(path, f"unreadable ({exc})", b"")
        if len(data) < _MANIFEST_HEAD.size:
            return self._damaged(path, f"{len(data)} bytes, shorter than its header", b"")
        magic, _version, generation, count, crc = _MANIFEST_HEAD.unpack_from(data, 0)
        body = data[_MANIFEST_HEAD.size:]
        if magic != MANIFEST_MAGIC:
            return self._damaged(path, "bad magic number", body)
        records, good = decode_all(body)
        if zlib.crc32(body) != crc or good != len(body) or len(records) != count:
            return self._damaged(path, f"checksum fails, {len(records)} of {count} records whole", body)
        return generation, {key: loc for _op, key, loc in records if loc is not None}

    def _damaged(self, path: str, why: str, body: bytes) -> tuple[int, dict[str, ChunkLocation]]:
        records, _good = decode_all(body)
        index = {key: loc for _op, key, loc in records if loc is not None}
        self.manifest_damage = why
        log.error("kvtier manifest %s is damaged (%s): kept %d records whose checksums hold, replaying the "
                  "journals on them; chunks it indexed beyond those are lost (misses)", path, why, len(index))
        return self.generation, index

    def _journal_path(self, generation: int) -> str:
        return os.path.join(self.directory, f"journal.{generation}")

    def _remove_leftovers(self) -> None:
        """Delete what a crash left: temporary manifests and journals of other generations."""
        keep = f"journal.{self.generation}"
        for name in os.listdir(self.directory):
            stale = name.endswith(".tmp") or (name.startswith("journal.") and name != keep)
            if stale:
                os.unlink(os.path.join(self.directory, name))
                self.leftovers_removed.append(name)
        if self.leftovers_removed:
            log.warning("kvtier: removed leftovers of an interrupted run: %s", self.leftovers_removed)

    def _open_journal(self) -> None:
        path = self._journal_path(self.generation)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._length = os.fstat(self._fd).st_size

    # -- appending -------------------------------------------------------------------------------
    def append(self, records: list[bytes], sync: bool = True) -> None:
        """Write records as one append (and fdatasync it when durable and `sync`); on failure cut the file back
        so no partial record remains."""
        if not records:
            return
        data = b"".join(records)
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(28, "short write to kvtier journal")
            if self.durable and sync:
                os.fdatasync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self._length)
            except OSError as exc:
                log.error("kvtier journal: could not cut back a failed append: %s", exc)
            raise
        self._length += len(data)
        self.records_since_checkpoint += len(records)

    def sync(self) -> None:
        """fdatasync what was appended with sync=False (when durable)."""
        if self.durable:
            os.fdatasync(self._fd)

    def checkpoint(self, index: dict[str, ChunkLocation]) -> None:
        """Write the whole index as a new manifest, then start an empty journal of the next generation."""
        generation = self.generation + 1
        body = b"".join(encode(OP_PUT, key, loc) for key, loc in index.items())
        head = _MANIFEST_HEAD.pack(MANIFEST_MAGIC, 1, generation, len(index), zlib.crc32(body))
        tmp = os.path.join(self.directory, "manifest.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = head + body
            if os.write(fd, data) != len(data):
                raise OSError(28, "short write of kvtier manifest")
            os.fsync(fd)
        except OSError:
            os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        # the new journal exists before the manifest names it, so a crash between leaves no gap
        new_fd = os.open(self._journal_path(generation), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        os.replace(tmp, os.path.join(self.directory, "manifest"))
        self._fsync_dir()
        old = self._journal_path(self.generation)
        os.close(self._fd)
        self._fd, self._length, self.generation = new_fd, 0, generation
        self.records_since_checkpoint = 0
        try:
            os.unlink(old)
        except FileNotFoundError:
            pass

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
