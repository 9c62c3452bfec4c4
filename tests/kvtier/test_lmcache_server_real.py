"""The real `lmcache server` (LMCache's MP mode) with fxctl's tier as its L2 adapter, started from server_argv
and driven by LMCache's own tools on the CPU: `lmcache ping` and `lmcache describe`, then `lmcache bench server
--mode cpu`, LMCache's MP client (lookup, store, retrieve, checksums of the KV). The chunks it stores land in
fxctl's L2 (journal and segments grow, the tier's metrics count the writes); after the server restarts, the same
requests find every chunk at once and read back the same bytes; the metrics come from the adapter's endpoint,
read with prometheus_client's parser. With the model's weights replaced in place, the next start finds none of
them (the tier keys chunks under the weights' fingerprint) and counts the mismatches. And LMCache's adapter
harness, `lmcache bench l2`, round-trips the adapter with its own data check."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from kvtier_helpers import free_port, sample, scrape

pytestmark = pytest.mark.lmcache
pytest.importorskip("lmcache.cli.main")

from fxctl.integrations.lmcache.server import (  # noqa: E402
    adapter_spec,
    describe_argv,
    health_url,
    http_url,
    lmcache_command,
    ping_argv,
    server_argv,
    server_environment,
)

PYTHON = sys.executable          # .ci/setup puts torch and LMCache into the test venv
KV_SHAPE = "(2,64,16,2,64):bfloat16:4"   # 4 layers, 2 heads x 64: 512 KiB a 256-token chunk
SEQUENCES, CHUNKS_PER_SEQ = 2, 2         # 512 tokens a request, LMCache's chunk size 256
LINE = re.compile(r"\[seq (\d+)/(cold|warm)\] (LOOKUP|CHECKSUM): (\S+)")


class ServerProcess:
    """`lmcache server` in a session of its own; its output in a log file."""

    def __init__(self, argv, cwd, log_path):
        self.argv, self.cwd, self.log_path = argv, cwd, log_path
        self.proc = None

    def start(self, timeout=240):
        env = {**os.environ, **server_environment()}
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"lmcache server exited {self.proc.returncode}:\n{self.tail()}"
            try:
                with urllib.request.urlopen(self.health, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        pytest.fail(f"lmcache server not healthy after {timeout} s:\n{self.tail()}")

    def stop(self, timeout=60):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def tail(self, lines=40):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])


def run(argv, cwd, timeout=300):
    env = {**os.environ, "LMCACHE_DISABLE_BANNER": "1"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def bench(ports, cwd):
    """LMCache's own MP client: per request a cold and a warm pass; {(seq, pass): {LOOKUP: .., CHECKSUM: ..}}."""
    argv = [*lmcache_command(PYTHON), "bench", "server", "--mode", "cpu",
            "--rpc-url", f"tcp://127.0.0.1:{ports['zmq']}", "--url", http_url(ports["http"]),
            "--num-tokens", str(256 * CHUNKS_PER_SEQ), "--kvcache-shape-spec", KV_SHAPE, "--num-blocks", "64",
            "--block-size", "16", "--start", "0", "--end", str(SEQUENCES), "--interval", "0"]
    done = run(argv, cwd)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen: dict = {}
    for seq, kind, what, value in LINE.findall(done.stdout):
        seen.setdefault((int(seq), kind), {})[what] = value
    assert len(seen) == 2 * SEQUENCES, done.stdout[-3000:]
    return seen


def wait_for(read, ok, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def test_chunks_stored_through_lmcache_are_in_fxctls_tier_and_found_after_a_restart(tmp_path):
    ports = {"zmq": free_port(), "http": free_port(), "metrics": free_port()}
    l2 = tmp_path / "fxtier"
    model = tmp_path / "model"          # the served model's folder: the tier keys chunks under its fingerprint
    model.mkdir()
    (model / "config.json").write_text('{"num_hidden_layers": 4}')
    (model / "model.safetensors").write_bytes(b"\x01" * 65536)
    argv = server_argv(PYTHON, ports["zmq"], 256 << 20, str(l2), 256 << 20, ports["metrics"],
                       http_port=ports["http"], tier={"segment_bytes": 64 << 20, "model": str(model)})
    server = ServerProcess(argv, str(tmp_path), tmp_path / "server.log")
    server.health = health_url(ports["http"])
    chunks = SEQUENCES * CHUNKS_PER_SEQ
    try:
        server.start()
        pinged = run(ping_argv(PYTHON, ports["http"]), str(tmp_path), timeout=60)
        assert pinged.returncode == 0 and "OK" in pinged.stdout, pinged.stdout + pinged.stderr
        described = run(describe_argv(PYTHON, ports["http"]), str(tmp_path), timeout=60)
        assert described.returncode == 0 and "MPCacheServer" in described.stdout, described.stdout

        first = bench(ports, str(tmp_path))
        for seq in range(SEQUENCES):
            assert first[(seq, "cold")]["LOOKUP"] == f"0/{CHUNKS_PER_SEQ}"      # nothing there yet: stored
            assert first[(seq, "warm")]["LOOKUP"] == f"{CHUNKS_PER_SEQ}/{CHUNKS_PER_SEQ}"
            assert first[(seq, "warm")]["CHECKSUM"] == first[(seq, "cold")]["CHECKSUM"]
        found = wait_for(lambda: scrape(ports["metrics"]),
                         lambda m: sample(m, "fxctl_tier_stored_chunks_total", tier="l2") >= chunks)
        assert sample(found, "fxctl_tier_stored_chunks_total", tier="l2") == chunks
        assert sample(found, "fxctl_tier_write_bytes_total", tier="l2") == chunks * (512 << 10)
        assert sample(found, "fxctl_tier_chunks", tier="l2") == chunks
        assert sample(found, "fxctl_tier_errors_total", tier="l2", kind="write") == 0
        # the same endpoint carries LMCache's own MP metrics, which agree
        assert sample(found, "lmcache_mp_l2_store_completed_objects_chunks_total") == chunks
        journal = sum(p.stat().st_size for p in l2.glob("journal.*"))
        assert journal > 0 and list(l2.glob("segment.*")), sorted(p.name for p in l2.iterdir())

        server.stop()
        assert server.proc.returncode is not None
        with pytest.raises(OSError):
            scrape(ports["metrics"])

        server.start()
        again = bench(ports, str(tmp_path))
        for seq in range(SEQUENCES):
            # L1 is empty after the restart: every chunk of the cold pass comes from fxctl's L2, byte for byte
            assert again[(seq, "cold")]["LOOKUP"] == f"{CHUNKS_PER_SEQ}/{CHUNKS_PER_SEQ}"
            assert again[(seq, "warm")]["CHECKSUM"] == first[(seq, "cold")]["CHECKSUM"]
        found = scrape(ports["metrics"])
        assert sample(found, "fxctl_tier_hits_total", tier="l2") >= chunks
        assert sample(found, "fxctl_tier_read_bytes_total", tier="l2") >= chunks * (512 << 10)
        assert sample(found, "fxctl_tier_read_latency_seconds_count", tier="l2") >= chunks
        assert sample(found, "fxctl_tier_stored_chunks_total", tier="l2") == 0   # nothing written again
        server.stop()

        # the same path with other weights (same size, other values): no chunk of the old KV comes back
        (model / "model.safetensors").write_bytes(b"\x02" * 65536)
        server.start()
        other = bench(ports, str(tmp_path))
        for seq in range(SEQUENCES):
            assert other[(seq, "cold")]["LOOKUP"] == f"0/{CHUNKS_PER_SEQ}"
        found = scrape(ports["metrics"])
        assert sample(found, "fxctl_tier_model_mismatches_total") >= chunks
        assert json.loads((l2 / "model.json").read_text())["chunks_of_other_weights"] == chunks
        server.stop()
    finally:
        server.kill()


def test_lmcache_bench_l2_round_trips_the_adapter_and_checks_the_data(tmp_path):
    spec = adapter_spec(str(tmp_path / "fxtier"), 256 << 20, segment_bytes=64 << 20)
    out = tmp_path / "bench-l2.json"
    done = run([*lmcache_command(PYTHON), "bench", "l2", "--l2-adapter", json.dumps(spec), "--data-size-kb", "256",
                "--num-keys", "16", "--in-flight", "2", "--l1-align-bytes", "4096", "--rounds", "1",
                "--lookup-max-hit-rate", "1.0", "--no-skip-verify", "--format", "json", "--output", str(out)],
               str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "All 32 keys data verified OK" in done.stdout, done.stdout[-3000:]
    ops = {op["operation"]: op for key, op in json.loads(out.read_text())["metrics"].items() if key.startswith("op_")}
    assert {name: (op["total_success"], op["total_keys"]) for name, op in ops.items()} == {
        "Store": (32, 32), "Lookup": (32, 32), "Load": (32, 32)}
