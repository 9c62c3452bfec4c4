"""What `fxctl bench tier` measures: one declaration of its settings and their defaults, checked in full."""

from __future__ import annotations

from dataclasses import dataclass, field

from fxctl.errors import BadInput
from fxctl.kvtier.config import GIB, IO_THREADS, MIB, padded
from fxctl.paths import bench_scratch_dir
from fxctl.tierbench.chunks import SHAPES


@dataclass
class TierBenchSpec:
    directory: str = field(default_factory=lambda: str(bench_scratch_dir()))  # point it at the array's mount
    sizes: tuple[str, ...] = ("32m", "4m")
    total_bytes: int = 2 * GIB          # per chunk size and backend
    l1_bytes: int = 1 * GIB             # for the L1-hit measure
    batch_bytes: int = 512 * MIB        # bytes per restore call (fxctl's harness) and per round (LMCache's)
    io_threads: tuple[int, ...] = (IO_THREADS,)  # swept for every backend (LMCache: disk_io_threads,
    #                                   num_workers); each backend is compared at its best count
    recovery_chunks: int = 100_000
    passes: int = 3                     # cold restore passes per process (fxctl's harness)
    repeats: int = 1                    # processes per backend and size, order alternated
    lmcache: bool = True                # LMCache's LocalDiskBackend in fxctl's harness
    l2_harness: bool = True             # LMCache's own harness (`lmcache bench l2`) with its adapters
    in_flight: tuple[int, ...] = (4,)   # `lmcache bench l2 --in-flight` depths
    fio_jobs: tuple[int, ...] = (1, 4)
    fio_depths: tuple[int, ...] = (1, 4, 16)
    keep: bool = False                  # keep the scratch directory (made inside `directory`) afterwards

    def __post_init__(self) -> None:
        """Refuse, before anything runs, what cannot make a measurement (named by the command's flags)."""
        unknown = [s for s in self.sizes if s not in SHAPES]
        if not self.sizes or unknown:
            raise BadInput(f"--size: {', '.join(unknown) or 'none given'}", f"one or more of {', '.join(SHAPES)}")
        name = max(self.sizes, key=lambda s: SHAPES[s].nbytes)
        chunk = SHAPES[name].nbytes
        for flag, value, least, why in (
                ("--total", self.total_bytes, chunk, f"one {name} chunk"),
                ("--batch", self.batch_bytes, chunk, f"one {name} chunk"),
                ("--l1", self.l1_bytes, 2 * padded(chunk), f"two {name} chunks (the L1-hit measure)")):
            if value < least:
                raise BadInput(f"{flag} {_mib(value)} holds less than {why}", f"give at least {_mib(least)}")
        for flag, value in (("--passes", self.passes), ("--repeats", self.repeats),
                            ("--recovery-chunks", self.recovery_chunks)):
            if value < 1:
                raise BadInput(f"{flag} {value}: must be at least 1")
        for flag, values in (("--io-threads", self.io_threads), ("--in-flight", self.in_flight),
                             ("--fio-jobs", self.fio_jobs), ("--fio-depths", self.fio_depths)):
            if not values or min(values) < 1:
                raise BadInput(f"{flag} {','.join(map(str, values)) or 'empty'}: every value must be at least 1")


def _mib(nbytes: int) -> str:
    return f"{nbytes / MIB:.4g} MiB"
