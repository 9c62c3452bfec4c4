"""Durability drills of L2 adapters in the real `lmcache server` (LMCache's MP mode), driven by LMCache's own
MP client (`lmcache bench server --mode cpu`: per sequence a lookup, a retrieve of what hit, a store of what
missed, and a checksum of the KV the client holds afterwards; the data is generated from the sequence
number, so a checksum equal to the first run's means the KV that came back is the KV that was stored).

Each drill starts the server as `fxctl serve` renders it, with only `--l2-adapter` changed:
  crash     stores in a burst, SIGKILL of the server's process group after `acked` sequences were stored and
            read back (acknowledged), a restart: the share of acknowledged chunks found, and sequences
            whose KV came back different (must be none)
  capacity  3x the L2 cap stored, a restart, 3x again: the bytes the L2 directory takes on disk, against the cap
  damage    stored, the server stopped, one byte flipped in every 64 KiB of stored data, a restart: chunks
            found with the same KV, found with different KV (must be none), missed
  full      L2 on a filesystem smaller than the data (a size-limited tmpfs): the stores go on (the client's
            run completes, every sequence read back from L1), the errors as the adapter reports them
The pure parts (parsing the client's lines, tallying a drill) are tested without LMCache; the drills run in
tests/kvtier/test_durability_real.py and `python -m benchmarks.durability` (the table in benchmarks/).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from fxctl.integrations.lmcache import server as lmcache_server

ADAPTERS = ("fxctl", "fs_native", "fs", "raw_block")
DRILLS = ("crash", "capacity", "damage", "full")
KV_SHAPE = "(2,64,16,2,64):bfloat16:4"   # 4 layers, 2 KV heads x 64: 512 KiB per 256-token chunk
CHUNK_BYTES = 512 << 10
CHUNKS_PER_SEQ = 4                        # 1,024 tokens a sequence
SEQ_BYTES = CHUNK_BYTES * CHUNKS_PER_SEQ
LINE = re.compile(r"\[seq (\d+)/(cold|warm)\] (LOOKUP|CHECKSUM): (\S+)")
FLIP_EVERY = 64 << 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def adapter_for(kind: str, l2: str, cap_bytes: int, model: str) -> tuple[dict | None, dict]:
    """(--l2-adapter spec or None for fxctl's, fxctl's tier params) as `fxctl serve` renders them."""
    if kind == "fxctl":
        return None, {"model": model}
    slot = -(-(CHUNK_BYTES + lmcache_server.RAW_BLOCK_HEADER) // 4096) * 4096 if kind == "raw_block" else 0
    return lmcache_server.lmcache_adapter_spec(kind, l2, cap_bytes, slot), {}


@dataclass
class Server:
    """One `lmcache server` with one L2 adapter, in a process group of its own; its log in `log_path`."""

    python: str
    kind: str
    l2: str
    cap_bytes: int
    model: str
    log_path: Path
    env: dict
    ports: dict = field(default_factory=lambda: {"zmq": free_port(), "http": free_port(), "metrics": free_port()})
    proc: subprocess.Popen | None = None

    def start(self, timeout: float = 240) -> float:
        os.makedirs(self.l2, exist_ok=True)
        spec, tier = adapter_for(self.kind, self.l2, self.cap_bytes, self.model)
        if spec and spec["type"] == "raw_block" and not os.path.exists(spec["device_path"]):
            fd = os.open(spec["device_path"], os.O_CREAT | os.O_RDWR, 0o644)
            try:   # raw_block wants its device (a file here) of its whole capacity before it starts
                os.posix_fallocate(fd, 0, spec["capacity_bytes"])
            finally:
                os.close(fd)
        argv = lmcache_server.server_argv(
            self.python, self.ports["zmq"], 256 << 20, self.l2, self.cap_bytes,
            self.ports["metrics"] if self.kind == "fxctl" else 0, http_port=self.ports["http"],
            tier={"segment_bytes": 64 << 20, **tier}, adapter=spec)
        started = time.monotonic()
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(argv, env={**self.env, **lmcache_server.server_environment()},
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = lmcache_server.health_url(self.ports["http"])
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lmcache server ({self.kind}) exited {self.proc.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"lmcache server ({self.kind}) not ready after {timeout:.0f} s: {self.tail()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> None:
        """SIGINT lets it close its adapter (raw_block checkpoints its index then); SIGKILL is the crash."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['metrics']}/metrics", timeout=10) as answer:
            return answer.read().decode()


def client_argv(python: str, server: Server, start: int, end: int) -> list[str]:
    return [*lmcache_server.lmcache_command(python), "bench", "server", "--mode", "cpu",
            "--rpc-url", f"tcp://127.0.0.1:{server.ports['zmq']}", "--url",
            lmcache_server.http_url(server.ports["http"]), "--num-tokens", str(256 * CHUNKS_PER_SEQ),
            "--kvcache-shape-spec", KV_SHAPE, "--num-blocks", "64", "--block-size", "16",
            "--start", str(start), "--end", str(end), "--interval", "0"]


def parse_lines(text: str) -> dict[tuple[int, str], dict[str, str]]:
    """{(seq, 'cold'|'warm'): {'LOOKUP': 'h/n', 'CHECKSUM': digest}} from the client's output."""
    seen: dict[tuple[int, str], dict[str, str]] = {}
    for seq, kind, what, value in LINE.findall(text):
        seen.setdefault((int(seq), kind), {})[what] = value
    return seen


def hits(lookup: str) -> tuple[int, int]:
    found, _, total = lookup.partition("/")
    return int(found), int(total)


def tally(reference: dict, after: dict, seqs) -> dict:
    """Per sequence of `seqs` after a restart: its chunks found (the cold pass's lookup), and whether the KV
    the client then read (the warm pass's checksum: L1 holds what the lookup brought up from L2) equals the
    reference run's checksum of the generated data, i.e. what came back is what was stored. The client prints
    a cold-pass checksum only for what it generated, so the warm one is compared."""
    out = {"sequences": len(seqs), "chunks": 0, "found": 0, "same_kv": 0, "different_kv": 0, "unread": 0}
    for seq in seqs:
        cold, warm = after.get((seq, "cold"), {}), after.get((seq, "warm"), {})
        ref = reference.get((seq, "cold"), {}).get("CHECKSUM")
        if "LOOKUP" not in cold or "CHECKSUM" not in warm or ref is None:
            out["unread"] += 1
            continue
        found, total = hits(cold["LOOKUP"])
        out["chunks"] += total
        out["found"] += found
        if found:   # what was found went into LMCache's L1 and from there, in the warm pass, to the client
            out["same_kv" if warm["CHECKSUM"] == ref else "different_kv"] += 1
    return out


def disk_bytes(path: str) -> int:
    """What a directory takes on disk (allocated blocks, not apparent sizes: preallocated files count whole)."""
    total = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def data_files(kind: str, l2: str) -> list[tuple[str, int]]:
    """(file, first byte of stored data) of an adapter's L2: the chunks' bytes, not its index."""
    files = []
    for root, _dirs, names in os.walk(l2):
        for name in names:
            path = os.path.join(root, name)
            if kind == "fxctl" and not name.startswith("segment."):
                continue              # journal and model.json: the index, not the data
            if kind == "raw_block":
                files.append((path, lmcache_server.RAW_BLOCK_META))   # its index checkpoint lives before that
            else:
                files.append((path, 0))
    return files


def flip_bytes(kind: str, l2: str) -> int:
    """Flip one byte in the middle of every 64 KiB of stored data that holds any (unwritten space is left
    alone): every chunk of every adapter is damaged, its index is not. Returns how many were flipped."""
    flipped = 0
    for path, start in data_files(kind, l2):
        with open(path, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            for offset in range(start, size, FLIP_EVERY):
                f.seek(offset)
                block = f.read(FLIP_EVERY)
                if not block.strip(b"\0"):
                    continue
                middle = min(len(block) - 1, FLIP_EVERY // 2)
                f.seek(offset + middle)
                f.write(bytes([block[middle] ^ 0xFF]))
                flipped += 1
    return flipped


def error_lines(log_text: str) -> int:
    """Lines of an adapter's errors in the server's log (LMCache's own adapters export no error counter)."""
    return sum(1 for line in log_text.splitlines() if re.search(r"\b(ERROR|Error|error|No space|ENOSPC)\b", line))
