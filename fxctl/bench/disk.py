"""The disk's own limits, measured by fio on the same filesystem, and page-cache control for cold reads."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

HUGEPAGES = "/proc/sys/vm/nr_hugepages"


@dataclass
class FioResult:
    rw: str
    bs: str
    iomem: str
    gbps: float | None
    error: str = ""


def drop_page_cache() -> bool:
    """sync and drop the page cache (needs root); False where not allowed (O_DIRECT reads bypass it anyway)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


class HugePageReservation:
    """Reserve 2 MiB huge pages for fio --iomem=mmaphuge while in the block; restores the old count."""

    def __init__(self, pages: int):
        self.pages = pages
        self.old: int | None = None

    def __enter__(self) -> HugePageReservation:
        try:
            with open(HUGEPAGES) as f:
                self.old = int(f.read())
            if self.old < self.pages:
                with open(HUGEPAGES, "w") as f:
                    f.write(str(self.pages))
        except OSError:
            self.old = None
        return self

    def available(self) -> int:
        try:
            with open("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") as f:
                return int(f.read())
        except OSError:
            return 0

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            try:
                with open(HUGEPAGES, "w") as f:
                    f.write(str(self.old))
            except OSError:
                pass


def run_fio(path: str, rw: str, bs: str, size: str, iomem: str = "malloc", iodepth: int = 8,
            numjobs: int = 1, runtime_s: int = 0) -> FioResult:
    """One fio job with O_DIRECT (libaio) on `path`; GB/s (1e9 bytes) of the whole group."""
    if not shutil.which("fio"):
        return FioResult(rw, bs, iomem, None, "fio not installed")
    cmd = ["fio", "--name=fxbench", f"--filename={path}", f"--size={size}", f"--bs={bs}", f"--rw={rw}",
           "--direct=1", "--ioengine=libaio", f"--iodepth={iodepth}", f"--numjobs={numjobs}",
           f"--iomem={iomem}", "--group_reporting", "--output-format=json"]
    if rw == "write":
        cmd.append("--end_fsync=1")
    if runtime_s:
        cmd += [f"--runtime={runtime_s}", "--time_based"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or "fio failed").strip().splitlines() or ["fio failed"]
        return FioResult(rw, bs, iomem, None, lines[-1])
    try:
        job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError) as exc:
        return FioResult(rw, bs, iomem, None, f"unreadable fio output: {exc}")
    side = job["read" if rw == "read" else "write"]
    return FioResult(rw, bs, iomem, side["bw_bytes"] / 1e9)


def fio_read_limit(path: str, chunk_bytes: int, file_size: str) -> list[FioResult]:
    """Sequential O_DIRECT reads at 1M, at the chunk's own request size, each with malloc and huge-page
    buffers; the best of these is the disk's read limit."""
    chunk_bs = f"{max(1, chunk_bytes // 1024)}k"
    results = []
    with HugePageReservation(pages=(chunk_bytes * 8) // (2 << 20) + 8) as huge:
        for bs in ("1M", chunk_bs):
            for iomem in ("malloc", "mmaphuge"):
                if iomem == "mmaphuge" and huge.available() * (2 << 20) < chunk_bytes * 8:
                    results.append(FioResult("read", bs, iomem, None, "no huge pages could be reserved"))
                    continue
                drop_page_cache()
                results.append(run_fio(path, "read", bs, file_size, iomem=iomem))
    return results
