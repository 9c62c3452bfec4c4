"""Calibration: the engine, run in virtual time on the 480B TP8 profile, reproduces report R2 within 15 %."""

import json

import pytest
from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.sim.calibrate import TOLERANCE, calibrate
from fxctl.sim.profile import load_profile

PROFILE = "mi308x-qwen3-coder-480b-tp8"


@pytest.fixture(scope="module")
def report():
    return calibrate(load_profile(PROFILE))


def test_every_r2_figure_is_within_15_percent(report):
    assert TOLERANCE == 0.15
    assert len(report.figures) == 12
    off = [f"{f.name}: {f.emulated:.2f} vs {f.published} ({f.ratio:.3f})" for f in report.figures if not f.within]
    assert not off, off


def test_fewer_fitted_parameters_than_half_the_figures_and_each_names_its_figure(report):
    assert 0 < len(report.fitted) <= len(report.figures) // 2
    for param in report.fitted:
        assert "fitted to R2" in param["source"], param
    assert report.sourced["datasheet, model config or measurement"] >= 15
    assert report.sourced["assumption or estimate"] <= 5


def test_the_shape_of_r2_holds(report):
    base, tiered, recompute = report.runs["baseline"], report.runs["tiered"], report.runs["no_offload"]
    levels = sorted(tiered)
    assert [tiered[c].ttft_p50_s for c in levels] == sorted(tiered[c].ttft_p50_s for c in levels)
    assert all(tiered[c].ttft_p50_s < base[c].ttft_p50_s for c in levels)
    assert recompute[16].ttft_p50_s > 10 * tiered[16].ttft_p50_s
    assert report.model_seconds > 500 and report.wall_seconds < 60


def test_calibrate_command_prints_the_table_and_json():
    result = CliRunner().invoke(cli, ["-o", "json", "sim", "calibrate", "--profile", PROFILE,
                                      "--requests-per-client", "2"])
    data = json.loads(result.output)
    assert {"figure", "published", "emulated", "ratio", "within_15pct"} <= set(data["figures"][0])
    assert "simulated GPU timing" in data["emulator"]
    assert "baseline = LMCache's stock disk tier" in data["interpretation"]
    assert result.exit_code == (0 if data["all_within_15pct"] else 1)


def test_calibration_block_size_shortcut_changes_no_figure():
    """The calibration books HBM in 256-token blocks for speed; vLLM's 16-token blocks give the same run."""
    from fxctl.sim.calibrate import Workload, cold_recovery
    from fxctl.sim.virtual import distinct_prompts

    profile = load_profile(PROFILE)
    coarse = Workload.from_profile(profile, requests_per_client=2)
    fine = Workload(coarse.prompt_tokens, coarse.prompt_spread, coarse.output_tokens, (8,), 2, block_size=16)
    prompts = distinct_prompts(16, coarse.prompt_tokens, coarse.prompt_spread, seed=8)
    assert coarse.block_size == 256
    runs = [cold_recovery(profile, w, 8, "fxctl", prompts, {})[0] for w in (coarse, fine)]
    assert runs[0].ttft_p50_s == pytest.approx(runs[1].ttft_p50_s, rel=1e-3)
    assert runs[0].output_throughput == pytest.approx(runs[1].output_throughput, rel=1e-3)
