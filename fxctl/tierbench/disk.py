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
    numjobs: int = 1
    iodepth: int = 8
    cpu_s_per_gb: float | None = None

    @property
    def label(self) -> str:
        return f"bs={self.bs} jobs={self.numjobs} qd={self.iodepth} {self.iomem}"


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
            numjobs: int = 1, runtime_s: int = 0, direct: bool = True) -> FioResult:
    """fio with O_DIRECT (libaio) on `path`; GB/s (1e9 bytes) of the whole group. With numjobs > 1 each job
    reads its own 1/numjobs of the file (offset_increment), so the jobs never read the same blocks."""
    if not shutil.which("fio"):
        return FioResult(rw, bs, iomem, None, "fio not installed")
    per_job = size
    extra = []
    if numjobs > 1:
        per_job_mib = max(1, _mib(size) // numjobs)
        per_job = f"{per_job_mib}M"
        extra.append(f"--offset_increment={per_job_mib}M")
    cmd = ["fio", "--name=fxbench", f"--filename={path}", f"--size={per_job}", f"--bs={bs}", f"--rw={rw}",
           f"--direct={int(direct)}", "--ioengine=libaio", f"--iodepth={iodepth}", f"--numjobs={numjobs}",
           f"--iomem={iomem}", "--group_reporting", "--output-format=json", *extra]
    if rw == "write":
        cmd.append("--end_fsync=1")
    if runtime_s:
        cmd += [f"--runtime={runtime_s}", "--time_based"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or "fio failed").strip().splitlines() or ["fio failed"]
        return FioResult(rw, bs, iomem, None, lines[-1], numjobs, iodepth)
    try:
        job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError) as exc:
        return FioResult(rw, bs, iomem, None, f"unreadable fio output: {exc}", numjobs, iodepth)
    side = job["read" if rw == "read" else "write"]
    cpu_s = (job.get("usr_cpu", 0) + job.get("sys_cpu", 0)) / 100 * job.get("elapsed", 0) * numjobs
    gb = side["io_bytes"] / 1e9
    return FioResult(rw, bs, iomem, side["bw_bytes"] / 1e9, "", numjobs, iodepth,
                     cpu_s_per_gb=cpu_s / gb if gb else None)


def _mib(size: str) -> int:
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    return int(float(size[:-1]) * units[size[-1].upper()]) if size[-1].upper() in units else int(size) // (1 << 20)


def fio_sweep(path: str, rw: str, chunk_bytes: int, file_size: str, jobs=(1, 4), depths=(1, 4, 16),
              iomems=("malloc", "mmaphuge"), runtime_s: int = 2) -> list[FioResult]:
    """fio at the chunk's own request size over numjobs x iodepth x buffer kind; the best is the ceiling.
    The page cache is dropped before each read run."""
    bs = f"{max(1, chunk_bytes // 1024)}k"
    results = []
    need = max(jobs) * max(depths) * chunk_bytes
    with HugePageReservation(pages=need // (2 << 20) + 8) as huge:
        for numjobs in jobs:
            for depth in depths:
                for iomem in iomems:
                    if iomem == "mmaphuge" and huge.available() * (2 << 20) < numjobs * depth * chunk_bytes:
                        results.append(FioResult(rw, bs, iomem, None, "not enough huge pages", numjobs, depth))
                        continue
                    drop_page_cache()
                    results.append(run_fio(path, rw, bs, file_size, iomem=iomem, iodepth=depth,
                                           numjobs=numjobs, runtime_s=runtime_s))
    return results


def best(results: list[FioResult]) -> FioResult | None:
    return max((r for r in results if r.gbps), key=lambda r: r.gbps, default=None)


def cached_bytes(directory: str) -> int | None:
    """Bytes of the files under `directory` resident in the page cache (fincore), None without fincore."""
    if not shutil.which("fincore"):
        return None
    files = [os.path.join(d, f) for d, _s, names in os.walk(directory) for f in names]
    if not files:
        return 0
    proc = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files],
                          capture_output=True, text=True)
    try:
        return sum(int(line.split()[0]) for line in proc.stdout.splitlines() if line.strip())
    except (ValueError, IndexError):
        return None


def fio_read_limit(path: str, chunk_bytes: int, file_size: str) -> list[FioResult]:
    """The read ceiling: fio_sweep at the chunk's own request size (kept for callers of the old name)."""
    return fio_sweep(path, "read", chunk_bytes, file_size)
