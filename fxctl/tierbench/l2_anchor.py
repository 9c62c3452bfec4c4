"""LMCache's own L2 adapter harness, `lmcache bench l2`, as the anchor: fs_native (O_DIRECT), raw_block
(posix and io_uring engines, on a file) and fxctl's tier as a `plugin` adapter (as shipped, and without read
checksums), same sizes and depths.

Cold loads: `lmcache bench l2` runs store, lookup and load in one process with no hook in between, so
each adapter is run twice: `--only store` (a fresh directory), then the page cache is dropped, then
`--only load` in a new process with the same flags (its key universe is the same, so it reads the keys
the first run stored; every adapter here reloads its index at start-up). `--warmup-rounds 0`: a warm-up
round would read the first keys before the measured rounds. The load run zeroes its buffers before each
round, outside its timer. Its data check (`--no-skip-verify`) needs store and load in one process, so it
is made by a separate small warm run (`verify_adapter`), not the timed one.
CPU seconds: the process's utime + stime (/proc/PID/stat, every thread) from the line it prints after its
first measured round to the line after its last, over the bytes of rounds 2..R: start-up, imports and the
harness's one-time buffer set-up (inside round 1's CPU window, outside its timer) are left out; the harness
zeroing its load buffers before each round stays in, the same for every adapter. Needs --rounds >= 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from fxctl.tierbench.disk import drop_page_cache

CLK_TCK = os.sysconf("SC_CLK_TCK")
# fxctl's tier as a plugin adapter: as shipped (every read checksummed), and with verify_reads off, as
# LMCache's own adapters read (they check nothing), to show what the check costs in this harness
FXCTL_PLUGIN = "fxctl (plugin)"
FXCTL_PLUGIN_UNVERIFIED = "fxctl (plugin, unverified)"


@dataclass
class AdapterSpec:
    name: str
    json_for: object  # callable(directory, capacity_bytes, slot_bytes) -> dict


def adapters(io_threads: int) -> list[AdapterSpec]:
    def fs_native(d, cap, slot):
        return {"type": "fs_native", "base_path": d, "use_odirect": True, "num_workers": io_threads}

    def raw_block(engine):
        def spec(d, cap, slot):
            slot += 4096  # each slot carries a 4 KiB header (header_bytes) before the payload
            cap = -(-cap // slot) * slot + slot
            device = os.path.join(d, "device.img")
            if not os.path.exists(device):  # raw_block wants an existing device (or file) of its capacity
                fd = os.open(device, os.O_CREAT | os.O_RDWR, 0o644)
                try:
                    os.posix_fallocate(fd, 0, cap + (64 << 20) + (1 << 20))
                finally:
                    os.close(fd)
            return {"type": "raw_block", "device_path": os.path.join(d, "device.img"), "io_engine": engine,
                    "slot_bytes": slot, "capacity_bytes": cap, "use_odirect": True,
                    "meta_total_bytes": 64 << 20, "meta_enable_periodic": False}
        return spec

    def fxctl_plugin(verify_reads: bool):
        def spec(d, cap, slot):
            return {"type": "plugin", "module_path": "fxctl.integrations.lmcache.l2_adapter",
                    "class_name": "FxTierL2Adapter",
                    "adapter_params": {"l2_path": d, "l2_bytes": cap + (1 << 30), "l1_bytes": 0,
                                       "io_threads": io_threads, "verify_reads": verify_reads}}
        return spec

    return [AdapterSpec(FXCTL_PLUGIN, fxctl_plugin(True)), AdapterSpec(FXCTL_PLUGIN_UNVERIFIED, fxctl_plugin(False)),
            AdapterSpec("fs_native O_DIRECT", fs_native),
            AdapterSpec("raw_block posix", raw_block("posix")),
            AdapterSpec("raw_block io_uring", raw_block("io_uring"))]


@dataclass
class L2Run:
    adapter: str
    data_size_kb: int
    num_keys: int
    in_flight: int
    rounds: int
    store_mbps: dict = field(default_factory=dict)
    load_mbps: dict = field(default_factory=dict)
    load_success: int = 0
    load_total_keys: int = 0
    load_cpu_s_per_gb: float | None = None
    store_cpu_s_per_gb: float | None = None
    cached_bytes_before_load: int | None = None
    error: str = ""


def lmcache_cli() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "lmcache")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "lmcache.cli.main"]


def _proc_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def bench_l2(adapter_json: dict, only: str, data_size_kb: int, num_keys: int, in_flight: int,
             rounds: int) -> tuple[dict | None, float | None, str]:
    """One `lmcache bench l2 --only <op>` run: (its JSON metrics of that op, CPU s of the op, error)."""
    cmd = [*lmcache_cli(), "bench", "l2", "--l2-adapter", json.dumps(adapter_json),
           "--data-size-kb", str(data_size_kb), "--num-keys", str(num_keys), "--in-flight", str(in_flight),
           "--l1-align-bytes", "4096", "--rounds", str(rounds), "--warmup-rounds", "0", "--only", only,
           "--format", "json"]
    env = {**os.environ, "LMCACHE_DISABLE_BANNER": "1", "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile("w+") as errfile:  # a file, not a pipe: LMCache's logs must not block it
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfile, text=True, env=env)
        marks = []  # CPU seconds when each round's line arrives
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.lstrip().startswith(("[Store] Round", "[Load] Round")):
                marks.append(_proc_cpu_s(proc.pid))
        proc.wait()
        errfile.seek(0)
        err = errfile.read()
    text = "".join(lines)
    try:
        block = text[text.index("\n{") + 1:text.rindex("\n}") + 2]
        metrics = json.loads(block)["metrics"]["op_0"]
    except (ValueError, KeyError):
        tail = (err.strip().splitlines() or text.strip().splitlines() or ["no output"])[-1]
        return None, None, f"exit {proc.returncode}: {tail}"
    cpu = marks[-1] - marks[0] if len(marks) >= 2 and None not in marks else None
    return metrics, cpu, ""


def run_adapter(spec: AdapterSpec, directory: str, data_size_kb: int, num_keys: int, in_flight: int,
                rounds: int) -> L2Run:
    from fxctl.tierbench.disk import cached_bytes

    run = L2Run(spec.name, data_size_kb, num_keys, in_flight, rounds)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    nbytes = data_size_kb * 1024 * num_keys * in_flight * rounds
    cfg = spec.json_for(directory, nbytes + (256 << 20), data_size_kb * 1024)
    try:
        store, store_cpu, run.error = bench_l2(cfg, "store", data_size_kb, num_keys, in_flight, rounds)
        if store is None:
            return run
        run.store_mbps = _spread(store)
        if store["total_success"] < store["total_keys"]:
            run.error = f"store wrote {store['total_success']}/{store['total_keys']} keys"
            return run
        measured = nbytes * (rounds - 1) / rounds / 1e9  # rounds 2..R: see the module's docstring
        run.store_cpu_s_per_gb = store_cpu / measured if store_cpu is not None else None
        drop_page_cache()
        run.cached_bytes_before_load = cached_bytes(directory)
        load, load_cpu, run.error = bench_l2(cfg, "load", data_size_kb, num_keys, in_flight, rounds)
        if load is None:
            return run
        run.load_mbps = _spread(load)
        run.load_success, run.load_total_keys = load["total_success"], load["total_keys"]
        run.load_cpu_s_per_gb = load_cpu / measured if load_cpu is not None else None
        if run.load_success < run.load_total_keys:
            run.error = f"load found {run.load_success}/{run.load_total_keys} keys"
        return run
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def verify_adapter(spec: AdapterSpec, directory: str, data_size_kb: int, in_flight: int) -> str:
    """A small warm store + load in one process with LMCache's round-trip check on: '' or the error."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    # room for its warm-up round and its measured round (raw_block evicts beyond its capacity)
    cfg = spec.json_for(directory, 2 * data_size_kb * 1024 * 4 * in_flight + (256 << 20), data_size_kb * 1024)
    cmd = [*lmcache_cli(), "bench", "l2", "--l2-adapter", json.dumps(cfg), "--data-size-kb", str(data_size_kb),
           "--num-keys", "4", "--in-flight", str(in_flight), "--l1-align-bytes", "4096", "--rounds", "1",
           "--no-skip-verify", "--lookup-max-hit-rate", "1.0", "-q"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LMCACHE_DISABLE_BANNER": "1"})
        return "" if proc.returncode == 0 else f"round-trip check failed (exit {proc.returncode})"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _spread(op: dict) -> dict:
    """GB/s (1e9 bytes) over the measured rounds; `lmcache bench l2` prints MiB/s per round."""
    gb = (1 << 20) / 1e9
    return {"min": op["throughput_min_mbps"] * gb, "avg": op["throughput_avg_mbps"] * gb,
            "max": op["throughput_max_mbps"] * gb}
