"""The settings of a tier store, as one plain dataclass (rendered into LMCache's extra_config too)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from fxctl.kvtier.admission import ADMISSION_POLICIES, DEFAULT_ADMISSION
from fxctl.units import GIB, KIB, MIB  # noqa: F401 (MIB: imported from here by the tier's users)

PAGE_BYTES = 64 * KIB  # L2 allocation unit: every chunk starts on a 64 KiB boundary
# tokens per KV chunk: one name and one default everywhere (profiles' tiers.chunk_tokens; LMCache calls it
# chunk_size, and the rendered LMCache config passes this value there)
CHUNK_TOKENS = 256
REQUEST_ALIGN = 4096   # every L2 request covers whole 4 KiB pages (O_DIRECT)
IO_THREADS = 16        # most chunk reads in parallel (16 x 4 MiB chunks beat 8 here); LMCache's disk_io_threads


@dataclass
class TierConfig:
    """Where L2 lives and how big each tier is.

    l1_bytes: DRAM budget of L1 (0 disables L1; puts then go straight to the write-behind queue).
    l2_bytes: capacity of L2 on disk (0 disables L2); space is preallocated segment by segment.
    """

    l2_path: str = ""
    l1_bytes: int = 1 * GIB
    l2_bytes: int = 16 * GIB
    segment_bytes: int = 1 * GIB
    io_threads: int = IO_THREADS           # most chunk reads in parallel
    inflight_bytes: int = 128 * MIB        # ... and about this many bytes requested at once (see store.py)
    write_threads: int = 4                 # write-behind threads (2 -> 4 doubled durable put throughput here)
    max_request_bytes: int = 64 * MIB      # O_DIRECT on a block device: one request per chunk up to this size
    piece_bytes: int = 1 * MIB             # where the CPU copies (tmpfs, page cache): requests of this size,
                                           # each checksummed while in cache (segments.py)
    max_pending_bytes: int = 512 * MIB     # write-behind queue bound; beyond it puts wait
    put_wait_s: float = 5.0                # how long a put waits for queue space before skipping L2
    verify_reads: bool = True
    durable: bool = True                   # fdatasync data and journal before a chunk counts as stored
    checkpoint_records: int = 50_000       # journal records between manifest checkpoints
    protected_share: float = 0.8           # share of L1 kept for chunks hit at least twice
    promote_after_hits: int = 2            # L2 hits before a chunk is copied up into L1
    direct_io: bool = True                 # O_DIRECT where the filesystem allows it
    l2_admission: str = DEFAULT_ADMISSION  # which chunks L2 gets: always | second-use | l1-evict (admission.py)
    model: str = ""                        # the model whose KV this is (a folder or a hub id): chunks are keyed
                                           # under its fingerprint (fingerprint.py); "": keys as given

    def __post_init__(self) -> None:
        if self.l2_admission not in ADMISSION_POLICIES:
            raise ValueError(f"l2_admission: {self.l2_admission!r} is not one of {', '.join(ADMISSION_POLICIES)}")
        for name in ("max_request_bytes", "piece_bytes"):  # O_DIRECT requests: whole 4 KiB pages
            value = getattr(self, name)
            if value < REQUEST_ALIGN or value % REQUEST_ALIGN:
                raise ValueError(f"{name}: {value} is not a positive multiple of {REQUEST_ALIGN} bytes")

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> TierConfig:
        """Build from a flat mapping (e.g. LMCache extra_config), converting types; unknown keys ignored."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in values:
                continue
            raw = values[f.name]
            default = getattr(cls, f.name)
            if isinstance(default, bool):
                kwargs[f.name] = raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                kwargs[f.name] = int(float(raw))
            elif isinstance(default, float):
                kwargs[f.name] = float(raw)
            else:
                kwargs[f.name] = str(raw)
        return cls(**kwargs)


def padded(nbytes: int, unit: int = PAGE_BYTES) -> int:
    """nbytes rounded up to a whole number of units."""
    return -(-nbytes // unit) * unit
