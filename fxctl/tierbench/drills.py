"""The four durability drills (fxctl.tierbench.durability says what each does), one adapter at a time, each in
a fresh L2 directory under `workdir`, every server process started and stopped here."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from fxctl.tierbench.durability import (
    LINE,
    SEQ_BYTES,
    Server,
    client_argv,
    disk_bytes,
    error_lines,
    flip_bytes,
    hits,
    parse_lines,
    tally,
)

MODEL = "fxctl-drill-model"   # fxctl's tier keys chunks under the served model's fingerprint (an id here)


@dataclass
class Drills:
    workdir: Path
    python: str                 # the interpreter with LMCache (and, for raw_block, its Rust helper)
    env: dict

    def server(self, kind: str, drill: str, cap_bytes: int, l2: str | None = None) -> Server:
        """A server of its own for each run of a drill: a fresh L2 directory (a second run starts empty)."""
        n = 0
        while (self.workdir / f"{kind}-{drill}-{n}").exists():
            n += 1
        base = self.workdir / f"{kind}-{drill}-{n}"
        base.mkdir(parents=True)
        return Server(self.python, kind, l2 or str(base / "l2"), cap_bytes, MODEL, base / "server.log", self.env)

    def client(self, server: Server, start: int, end: int, timeout: float = 600) -> dict:
        done = subprocess.run(client_argv(self.python, server, start, end), capture_output=True, text=True,
                              timeout=timeout, env={**self.env, "LMCACHE_DISABLE_BANNER": "1"})
        if done.returncode != 0:
            raise RuntimeError(f"lmcache bench server exited {done.returncode}: {done.stderr[-1500:]}\n"
                               f"server log:\n{server.tail()}")
        return parse_lines(done.stdout)

    def crash(self, kind: str, acked_target: int = 20, burst: int = 400, delay_s: float = 0.0) -> dict:
        """SIGKILL during a burst of stores once `acked_target` sequences were stored and read back (and
        `delay_s` more seconds of the burst went by)."""
        server = self.server(kind, "crash", 1 << 30)
        server.start()
        client = subprocess.Popen(client_argv(self.python, server, 0, burst), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**self.env, "LMCACHE_DISABLE_BANNER": "1"})
        lines, acked = [], set()
        first_store = None
        assert client.stdout is not None
        for line in client.stdout:
            lines.append(line)
            match = LINE.search(line)
            if match and match.group(3) == "LOOKUP":
                first_store = first_store or time.monotonic()
                found, total = hits(match.group(4))
                if match.group(2) == "warm" and found == total:
                    acked.add(int(match.group(1)))
            if len(acked) >= acked_target:
                break
        time.sleep(delay_s)
        killed_after = time.monotonic() - (first_store or time.monotonic())
        server.stop(signal.SIGKILL)
        client.kill()
        client.wait()
        reference = parse_lines("".join(lines))
        if not acked:
            raise RuntimeError(f"no sequence was acknowledged before the kill:\n{''.join(lines)[-1500:]}")
        server.start()
        after = self.client(server, 0, max(acked) + 1)
        server.stop()
        result = tally(reference, after, sorted(acked))
        return {**result, "killed_after_s": round(killed_after, 1),
                "found_share": result["found"] / result["chunks"] if result["chunks"] else None}

    def capacity(self, kind: str, cap_seqs: int = 8) -> dict:
        """3x the cap stored, a restart, 3x again (other data): the L2 directory's bytes on disk each time."""
        cap = cap_seqs * SEQ_BYTES
        server = self.server(kind, "capacity", cap)
        server.start()
        self.client(server, 0, 3 * cap_seqs)
        server.stop()
        first = disk_bytes(server.l2)
        server.start()
        self.client(server, 1000, 1000 + 3 * cap_seqs)
        server.stop()
        second = disk_bytes(server.l2)
        return {"cap_bytes": cap, "stored_bytes": 6 * cap, "disk_after_first": first, "disk_after_restart": second,
                "over_cap": round(second / cap, 2)}

    def damage(self, kind: str, seqs: int = 8) -> dict:
        """Stored, stopped, a byte flipped in every 64 KiB of stored data, restarted, read again."""
        server = self.server(kind, "damage", 4 * seqs * SEQ_BYTES)
        server.start()
        reference = self.client(server, 0, seqs)
        server.stop()
        flipped = flip_bytes(kind, server.l2)
        server.start()
        after = self.client(server, 0, seqs)
        counted = tier_errors(server, "checksum") if kind == "fxctl" else None
        server.stop()
        return {**tally(reference, after, range(seqs)), "bytes_flipped": flipped, "errors_counted": counted}

    def full(self, kind: str, fs_mib: int = 24, seqs: int = 32) -> dict:
        """L2 on a tmpfs of `fs_mib` (the adapter is told 4x more): stores go on, errors as reported."""
        base = self.workdir / f"{kind}-full-tmpfs"
        mount = base / "tmpfs"
        mount.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={fs_mib}m", "tmpfs", str(mount)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            return {"skipped": f"cannot mount a tmpfs: {mounted.stderr.strip()}"}
        try:
            server = self.server(kind, "full", 4 * fs_mib << 20, l2=str(mount / "l2"))
            try:
                server.start()
            except OSError as exc:   # raw_block: its device is preallocated whole, it cannot fit
                return {"skipped": f"the adapter's device cannot be made on a {fs_mib} MiB filesystem: {exc}"}
            after = self.client(server, 0, seqs)
            served = sum(1 for s in range(seqs) if (s, "warm") in after
                         and hits(after[(s, "warm")]["LOOKUP"])[0] == hits(after[(s, "warm")]["LOOKUP"])[1])
            counted = tier_errors(server) if kind == "fxctl" else None
            alive = server.proc is not None and server.proc.poll() is None
            server.stop()
            return {"sequences": seqs, "served": served, "server_alive": alive, "errors_counted": counted,
                    "error_log_lines": error_lines(server.log_path.read_text(errors="replace")),
                    "fs_bytes": fs_mib << 20, "stored_bytes": seqs * SEQ_BYTES}
        finally:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def samples(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def tier_errors(server: Server, kind: str | None = None) -> float:
    """fxctl's tier's errors (of one kind, or all) from its metrics endpoint."""
    return sum(s.value for s in samples(server.metrics()) if s.name == "fxctl_tier_errors_total"
               and kind in (None, s.labels.get("kind")))


def run(drills: Drills, kinds, names, progress=print) -> dict:
    """{adapter: {drill: result}}; a drill that fails says why in its cell, the others still run."""
    results: dict = {}
    for kind in kinds:
        for name in names:
            started = time.monotonic()
            try:
                cell = getattr(drills, name)(kind)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                cell = {"failed": str(exc)[-800:]}
            cell["seconds"] = round(time.monotonic() - started, 1)
            results.setdefault(kind, {})[name] = cell
            progress(f"{kind} {name}: {cell}")
    return results


def default_env(repo: str | None) -> dict:
    """The servers' environment: this checkout first on the path (the serving env imports fxctl's adapter)."""
    env = dict(os.environ)
    if repo:
        env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
