"""The tier benchmark's pieces on small sizes (the full run is `fxctl bench tier`, not a test)."""

from click.testing import CliRunner

from fxctl.bench.tier import TierBenchSpec, bench_l1_hits, bench_recovery
from fxctl.bench.workload import LLAMA_8B_TP1, QWEN_480B_TP8, ChunkSource
from fxctl.cli import cli


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


def test_bench_tier_has_help():
    out = CliRunner().invoke(cli, ["bench", "tier", "--help"])
    assert out.exit_code == 0 and "--json" in out.output
