"""The tier benchmark's pieces on small sizes (the full run is `fxctl bench tier`, not a test)."""

import os

import pytest
from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.kvtier.config import padded
from fxctl.tierbench.bench import TierBenchSpec, bench_l1_hits, bench_recovery
from fxctl.tierbench.chunks import LLAMA_8B_TP1, QWEN_480B_TP8, ChunkSource


def test_chunk_shapes_are_the_real_models_per_rank_sizes():
    assert LLAMA_8B_TP1.nbytes == 32 << 20
    assert QWEN_480B_TP8.nbytes == 3_968 << 10


def test_chunk_source_is_distinct_and_reproducible():
    src = ChunkSource(64 << 10, windows=2)
    a, b = bytes(src.chunk(0)), bytes(src.chunk(2))
    assert a != b and src.matches(0, memoryview(a)) and not src.matches(1, memoryview(a))


def test_recovery_finds_every_chunk_from_journal_and_manifest(tmp_path):
    result = bench_recovery(TierBenchSpec(directory=str(tmp_path), recovery_chunks=3000))
    assert result["found_from_journal"] == result["found_from_manifest"] == 3000


def test_l1_hits_are_measured_against_a_plain_copy(tmp_path):
    result = bench_l1_hits(TierBenchSpec(directory=str(tmp_path), sizes=("4m",)))
    assert result["4m"]["l1_hit_gbps"] > 0 and result["4m"]["plain_copy_gbps"] > 0


def test_the_l1_hit_measure_runs_within_the_l1_budget_it_is_given(tmp_path, monkeypatch):
    """--l1 sizes the measure's L1 (it was ignored): the chunks it reads back all fit, every read is a hit."""
    from fxctl.kvtier import store as store_mod

    seen = []
    real = store_mod.TierStore.get_into

    def get_into(self, keys, buffers):
        seen.append((self.cfg.l1_bytes, len(keys), real(self, keys, buffers)))
        return seen[-1][2]

    monkeypatch.setattr(store_mod.TierStore, "get_into", get_into)
    two = 2 * padded(QWEN_480B_TP8.nbytes)
    bench_l1_hits(TierBenchSpec(directory=str(tmp_path), sizes=("4m",), l1_bytes=two))
    assert {(budget, n) for budget, n, _ in seen} == {(two, 2)}
    assert all(None not in sizes for _b, _n, sizes in seen)  # no miss: the measure is of hits


@pytest.mark.parametrize("args, says", [
    (["--total", "0"], "--total 0 MiB holds less than one 32m chunk"),
    (["--size", "32m", "--batch", "8M"], "--batch 8 MiB holds less than one 32m chunk"),
    (["--l1", "32M"], "--l1 32 MiB holds less than two 32m chunks"),
    (["--passes", "0"], "--passes"),
    (["--recovery-chunks", "-5"], "--recovery-chunks"),
])
def test_bench_tier_refuses_settings_that_cannot_measure_before_running(args, says, monkeypatch, capsys):
    import fxctl.tierbench.bench as tier
    from tests.support.cli import run_main

    monkeypatch.setattr(tier, "run", lambda spec: pytest.fail("ran with a bad setting"))
    code, out, err = run_main(["bench", "tier", *args], monkeypatch, capsys)
    assert code == 2 and says in out + err, out + err
    assert "Traceback" not in out + err


def test_bench_tier_sizes_its_minimums_by_the_chunks_it_will_use(monkeypatch):
    import fxctl.tierbench.bench as tier

    seen = {}
    monkeypatch.setattr(tier, "run", lambda spec: seen.setdefault("spec", spec) and {"ratios": []})
    out = CliRunner().invoke(cli, ["-o", "json", "bench", "tier", "--size", "4m", "--total", "8M", "--batch", "4M"])
    assert out.exit_code == 0, out.output  # 4 MiB holds one 3.875 MiB chunk; no 32m chunk is asked for
    assert seen["spec"].batch_bytes == 4 << 20


def test_bench_tier_has_help_and_json_is_the_global_option():
    out = CliRunner().invoke(cli, ["bench", "tier", "--help"])
    assert out.exit_code == 0 and "-o json" in out.output and "/work/" not in out.output
    assert CliRunner().invoke(cli, ["bench", "tier", "--json"]).exit_code == 2   # gone: use -o json


def test_bench_tier_scratch_defaults_under_the_cache_dir(tmp_path, monkeypatch):
    import fxctl.tierbench.bench as tier

    seen = {}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tier, "run", lambda spec: seen.setdefault("spec", spec) and {"ratios": []})
    out = CliRunner().invoke(cli, ["-o", "json", "bench", "tier", "--total", "1.5G"])
    assert out.exit_code == 0, out.output
    assert seen["spec"].directory == str(tmp_path / "cache" / "fxctl" / "bench" / "tier")
    assert seen["spec"].total_bytes == 3 << 29
    assert tier.TierBenchSpec().directory == seen["spec"].directory


def test_restore_harness_verifies_every_chunk_outside_the_timer(tmp_path):
    from fxctl.tierbench.restore import measure

    out = measure("fxctl", str(tmp_path / "fx"), QWEN_480B_TP8, 3 * QWEN_480B_TP8.nbytes,
                  2 * QWEN_480B_TP8.nbytes, io_threads=2, passes=2)
    assert out["verified"] and out["found_after_reopen"] == out["chunks"] == 3
    assert len(out["passes"]) == 2 and all(p["verified"] == 3 for p in out["passes"])
    assert out["restore_gbps"]["min"] <= out["restore_gbps"]["median"] <= out["restore_gbps"]["max"]


def test_ratios_compare_fxctl_with_the_best_lmcache_adapter_in_its_harness():
    from fxctl.tierbench.bench import lmcache_harness_ratios

    def run(name, load, cpu):
        return {"adapter": name, "in_flight": 4, "load_mbps": {"min": load, "avg": load, "max": load},
                "store_mbps": {"avg": 1.0}, "load_cpu_s_per_gb": cpu, "error": ""}

    res = {"lmcache_harness": [run("fxctl (plugin)", 2.0, 0.5), run("fs_native O_DIRECT", 1.0, 1.0),
                               run("raw_block posix", 4.0, 0.25), run("fxctl (plugin, unverified)", 5.0, 0.4)]}
    rows = {r["measure"].split(" `")[0]: r for r in lmcache_harness_ratios(res, "4 MiB", 1.0)}
    # the unverified plugin is neither fxctl's figure nor an anchor: it gets its own row
    load = rows["cold load, fxctl / best LMCache adapter,"]
    assert load["value"] == 0.5 and load["met"] is False and "raw_block posix" in load["detail"]
    bare = rows["cold load, fxctl without read checksums / best LMCache adapter,"]
    assert bare["value"] == 1.25 and bare["goal"] is None and "0.50 vs 0.40 s/GB" in bare["detail"]


def test_a_ratio_just_under_its_goal_never_reads_as_the_goal():
    from fxctl.tierbench.bench import _row

    row = _row("x", 0.9996, 1.0, 1.0, "")
    assert row["value"] == 0.999 and row["met"] is False
    assert _row("x", 1.2, 1.0, 1.2, "")["value"] == 1.2 and _row("x", 3.0, 2.0, None, "")["value"] == 1.5
    assert _row("x", 0.29, 1.0, None, "")["value"] == 0.29  # 0.29 * 1000 is 289.99999999999994 in floats


def test_a_thread_sweep_compares_each_backend_at_its_best_count(monkeypatch, tmp_path):
    """--io-threads 2,16: every backend of both harnesses runs at each count; the ratios take each one's best,
    so no backend is held to a count that suits another (fxctl caps its readers at the CPUs on tmpfs)."""
    from fxctl.tierbench import bench

    def run(name, threads, load, store):
        return {"adapter": name, "in_flight": 4, "io_threads": threads, "error": "", "load_cpu_s_per_gb": 0.2,
                "load_mbps": {"min": load, "avg": load, "max": load}, "store_mbps": {"avg": store}}

    res = {"lmcache_harness": [run("fxctl (plugin)", 2, 3.0, 1.0), run("fxctl (plugin)", 16, 2.0, 2.0),
                               run("fs_native O_DIRECT", 2, 1.0, 1.0), run("fs_native O_DIRECT", 16, 4.0, 3.0)]}
    rows = {r["measure"].split(",")[0]: r for r in bench.lmcache_harness_ratios(res, "4 MiB", 1.0)}
    assert rows["cold load"]["value"] == 0.75 and "at 16 threads; fxctl at 2 threads" in rows["cold load"]["detail"]
    assert rows["store"]["value"] == 0.666  # 2/3, shown rounded down

    def child(spec, backend, size, io_threads):  # a fake restore process: LocalDisk gains from threads
        gbps = {"fxctl": 5.0, "lmcache-localdisk": io_threads / 2}.get(backend, 1.0)
        return {"backend": backend, "passes": [{"gbps": gbps, "cpu_s_per_gb": 0.1, "cached_bytes_before": 0,
                                                "cache_dropped": True}],
                "put": {"gbps": 1.0, "cpu_s_per_gb": 0.1}, "found_after_reopen": 1, "chunks": 1, "verified": True}

    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setattr(bench, "fio_sweep", lambda *a, **k: [])
    monkeypatch.setattr(bench.os, "unlink", lambda path: None)
    spec = bench.TierBenchSpec(directory=str(tmp_path), io_threads=(2, 16), l2_harness=False, repeats=2)
    out = bench.bench_size(spec, "4m", 0)
    assert len(out["runs"]) == 2 * 2 * 3 and {r["io_threads"] for r in out["runs"]} == {2, 16}
    assert out["fxctl_harness"]["lmcache-localdisk"]["io_threads"] == 16
    assert out["fxctl_harness"]["lmcache-localdisk"]["restore_gbps"]["median"] == 8.0
    assert [m["io_threads"] for m in out["fxctl_harness_swept"]["fxctl"]] == [2, 16]
    _, table = bench.backend_rows({"sizes": [out]})
    assert {r[2] for r in table} >= {"fxctl t2", "fxctl t16", "lmcache-localdisk t16"}


def test_the_unverified_backend_reads_without_checksums_and_its_cost_is_a_row(tmp_path):
    from fxctl.tierbench.bench import ratios
    from fxctl.tierbench.restore import UNVERIFIED, make_backend

    backend = make_backend(UNVERIFIED, str(tmp_path / "u"), QWEN_480B_TP8, 1, 1, 2)
    try:
        assert backend.cfg.verify_reads is False
    finally:
        backend.close()

    def harness(load, cpu):
        return {"restore_gbps": {"min": load, "median": load, "max": load},
                "restore_cpu_s_per_gb": {"median": cpu}, "put_gbps": {"median": 1.0}, "chunks": 4,
                "found_after_reopen": 4}

    res = {"size": "4m", "chunk_bytes": QWEN_480B_TP8.nbytes,
           "fxctl_harness": {"fxctl": harness(8.0, 0.25), UNVERIFIED: harness(10.0, 0.20),
                             "lmcache-localdisk": harness(10.0, 0.19)}}
    rows = {r["measure"]: r for r in ratios({"medium": "tmpfs (tmpfs on /x)", "sizes": [res]})}
    bare = next(r for m, r in rows.items() if m.startswith("cold load, fxctl without read checksums"))
    assert bare["value"] == 1.0 and "+0.05" in bare["detail"]


def test_runs_alternate_their_order_in_both_harnesses(monkeypatch, tmp_path):
    """No backend always runs first and no thread count always runs first: fxctl's harness flips backends and
    thread counts per repeat; LMCache's flips its adapters per (depth, thread count) group, and both record
    the order they ran in."""
    from fxctl.tierbench import bench, l2_anchor

    def child(spec, backend, size, io_threads):
        return {"backend": backend, "passes": [{"gbps": 1.0, "cpu_s_per_gb": 0.1, "cached_bytes_before": 0,
                                                "cache_dropped": True}],
                "put": {"gbps": 1.0, "cpu_s_per_gb": 0.1}, "found_after_reopen": 1, "chunks": 1, "verified": True}

    def adapter_run(spec, where, kb, num_keys, depth, rounds):
        return l2_anchor.L2Run(spec.name, kb, num_keys, depth, rounds, error="")

    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setattr(bench, "fio_sweep", lambda *a, **k: [])
    monkeypatch.setattr(bench.os, "unlink", lambda path: None)
    monkeypatch.setattr(l2_anchor, "run_adapter", adapter_run)
    monkeypatch.setattr(l2_anchor, "verify_adapter", lambda *a: "")
    spec = bench.TierBenchSpec(directory=str(tmp_path), io_threads=(2, 16), repeats=2, in_flight=(4, 16))
    out = bench.bench_size(spec, "4m", 0)
    fx = [o for o in out["order"] if o.startswith(("fxctl t", "lmcache-localdisk t"))]
    assert fx == ["fxctl t2", "lmcache-localdisk t2", "fxctl t16", "lmcache-localdisk t16",
                  "lmcache-localdisk t16", "fxctl t16", "lmcache-localdisk t2", "fxctl t2"]
    n = len(l2_anchor.adapters(2))
    groups = [out["lmcache_order"][i:i + n] for i in range(0, 4 * n, n)]
    assert [g[0].split(" t")[1] for g in groups] == ["2", "16", "16", "2"]  # thread order flips per depth
    firsts = [g[0].split(" qd")[0] for g in groups]
    assert firsts[0] != firsts[1] and firsts[1] != firsts[2] and firsts[2] != firsts[3]
    names = {a.name for a in l2_anchor.adapters(2)}
    assert all({o.split(" qd")[0] for o in g} == names for g in groups)  # every adapter in every group
    checked = [r for r in out["lmcache_harness"] if r.get("round_trip_check") == "ok"]
    assert len(out["lmcache_harness"]) == 4 * n and len(checked) == n  # one round-trip check per adapter


def _vm_flags(buf) -> set[str]:
    from fxctl.kvtier.buffers import address_of

    addr = address_of(buf)
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.startswith("VmFlags:"):
                return set(line.split()[1:])
    raise AssertionError("mapping not found")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc")
def test_fxctls_harness_gives_it_the_callers_kind_of_memory(tmp_path):
    """LMCache's LocalDiskBackend reads into its CPU pool (no huge pages by default); fxctl's backend in the
    same harness must get the same kind of destination and staging memory, not fxctl's own huge-page-advised
    buffers (which ran restores on tmpfs ~11 % slower here: an asymmetry, not the tier)."""
    from fxctl.kvtier.buffers import aligned_buffer, is_aligned
    from fxctl.tierbench.chunks import SHAPES
    from fxctl.tierbench.restore import FxctlBackend, caller_buffers

    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):  # a kernel with THP: the flag shows
        assert "hg" in _vm_flags(aligned_buffer(4 << 20))  # the tier's own buffers ask for huge pages
    plain = caller_buffers(3 << 20 | 5, 3)
    assert [len(b) for b in plain] == [3 << 20 | 5] * 3 and all(is_aligned(b) for b in plain)
    assert all("hg" not in _vm_flags(b) and not any(b[::4096]) for b in plain)  # written once, zeros
    backend = FxctlBackend(str(tmp_path), SHAPES["4m"], chunks=2, batch=2, io_threads=2)
    try:
        staged = [backend.staging.get() for _ in range(2)]
        for buf in [*backend.dests, *staged]:
            assert is_aligned(buf) and "hg" not in _vm_flags(buf)
    finally:
        backend.close()


def test_the_bench_works_in_its_own_directory_and_leaves_the_rest_of_dir_alone(tmp_path, monkeypatch):
    """--dir may be the array's mount holding the tier's data: only the bench's own new directory goes."""
    from fxctl.tierbench import bench

    mount = tmp_path / "mnt"
    (mount / "fxctl").mkdir(parents=True)  # a name the bench uses inside its scratch directory
    (mount / "fxctl" / "segment-0").write_bytes(b"kv")
    (mount / "keep.me").write_text("data")
    seen = []

    def size(spec, name, k):
        seen.append(spec.directory)
        os.makedirs(os.path.join(spec.directory, "fxctl"))
        return {}

    monkeypatch.setattr(bench, "bench_size", size)
    monkeypatch.setattr(bench, "bench_l1_hits", lambda spec: {})
    monkeypatch.setattr(bench, "bench_recovery", lambda spec: None)
    monkeypatch.setattr(bench, "ratios", lambda results: [])
    out = bench.run(bench.TierBenchSpec(directory=str(mount), sizes=("4m",)))
    assert os.path.dirname(seen[0]) == str(mount) and out["scratch"] == seen[0]
    assert sorted(os.listdir(mount)) == ["fxctl", "keep.me"]  # the scratch directory is gone, nothing else
    assert (mount / "fxctl" / "segment-0").read_bytes() == b"kv"

    fresh = tmp_path / "new" / "tier"
    out = bench.run(bench.TierBenchSpec(directory=str(fresh), sizes=("4m",), keep=True))
    assert os.path.isdir(out["scratch"])  # --keep: kept, and its path is in the result
    bench.run(bench.TierBenchSpec(directory=str(tmp_path / "made"), sizes=("4m",)))
    assert not (tmp_path / "made").exists()  # a directory the bench made for itself goes when left empty


def test_a_dir_that_is_a_file_is_refused(tmp_path, monkeypatch, capsys):
    from tests.support.cli import run_main

    target = tmp_path / "file"
    target.write_text("x")
    code, out, err = run_main(["bench", "tier", "--dir", str(target), "--size", "4m"], monkeypatch, capsys)
    assert code == 2 and f"--dir {target}: cannot make a scratch directory there" in out + err
    assert target.read_text() == "x"
