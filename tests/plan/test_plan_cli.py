"""`fxctl plan` as users run it (issue 29): the acceptance command, config-only planning, the sweep and
its plot, --write-profile read back by the loaders serve and tune use, and bad input. Predictions are the
emulator's (virtual time, SIMULATED GPU timing): they are checked against its calibration, not timed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from fxctl.cli import main
from fxctl.sim.calibrate import calibrate
from fxctl.sim.profile import load_profile

CONFIGS = Path(__file__).with_name("configs")
R2 = "mi308x-qwen3-coder-480b-tp8"
ACCEPTANCE = ["plan", "--profile", R2, "--context", "128k", "--concurrency", "16", "--slo", "ttft_p50<=12s"]


@dataclass
class Ran:
    exit_code: int
    output: str       # stdout and stderr, as a terminal shows them


@pytest.fixture
def run(capsys):
    """fxctl ARGS through its one error boundary (fxctl.cli.main), as the installed command runs it."""
    def invoke(*args: str) -> Ran:
        with pytest.raises(SystemExit) as exited:
            main(list(args))
        captured = capsys.readouterr()
        return Ran(int(exited.value.code or 0), captured.out + captured.err)
    return invoke


def data(ran: Ran) -> dict:
    return json.loads(ran.output[:ran.output.rindex("}") + 1])


def test_acceptance_command_names_bandwidth_and_ssds_and_checks_r2(run):
    table = run(*ACCEPTANCE)      # its time (about 2 s here) is the note's figure, not a timed assertion
    for figure in ("bytes per token, per GPU", "KV pool per GPU", "largest max_model_len", "DRAM pool",
                   "SSD tier", "read rate the TTFT target needs", "SSDs / links for that rate", "R2 cold-recovery"):
        assert figure in table.output
    plan = data(run("-o", "json", *ACCEPTANCE))
    assert plan["kv"]["per_gpu_bytes"] == 15_872 and plan["kv"]["stored_bytes"] == 126_976
    assert plan["bandwidth"]["needed_gbs"] == pytest.approx(16 * 131_072 * 126_976 / 1e9 / 12)
    assert plan["bandwidth"]["ssds_needed"] >= 1 and plan["bandwidth"]["links_needed"] >= 1
    assert plan["r2_check"]["within_15pct"] and plan["r2_check"]["report_ttft_p50_s"] == 11.85
    cold = next(p for p in plan["predictions"] if p["case"] == "cold")
    recompute = next(p for p in plan["predictions"] if p["case"] == "recompute")
    assert cold["ttft_p50_s"] < recompute["ttft_p50_s"]
    # one 16.6 GB restore at the per-request read rate (1.31 GB/s) takes longer than 12 s: said, and exit 6
    assert table.exit_code == 6 and "whatever the SSDs and links" in table.output


def test_r2_check_is_the_calibrated_emulators_figure(run):
    plan = data(run("-o", "json", *ACCEPTANCE))
    report = calibrate(load_profile(R2))
    tiered16 = report.runs["tiered"][16].ttft_p50_s
    assert plan["r2_check"]["predicted_ttft_p50_s"] == pytest.approx(tiered16, rel=1e-3)


def test_a_looser_slo_is_met_by_the_least_hardware_found(run):
    plan = data(run("-o", "json", "plan", "--profile", R2, "--context", "128k", "--concurrency", "16",
                          "--slo", "ttft_p50<=14s"))
    assert plan["recommended"]["met_by"] == "emulated cold recovery"
    assert plan["recommended"]["links"] >= 2           # one 100 GbE link carries 11.8 GB/s: too little
    assert plan["recommended"]["tried"][-1]["ttft_p50_s"] <= 14


def test_memory_looks_free_yet_the_setting_runs_out(run):
    out = run("plan", "--profile", R2, "--context", "128k", "--concurrency", "64")
    assert out.exit_code == 0
    assert "runs out while memory looks free" in out.output and "only 52 fit at once" in out.output


def test_config_only_mla_plan_keeps_the_latent_whole_per_rank(run, tmp_path):
    plan = data(run("-o", "json", "plan", "--model-config", str(CONFIGS / "deepseek-v3.json"), "--gpu", "h200",
                          "--gpus", "8", "--tp", "8", "--kv-dtype", "fp8", "--context", "64k",
                          "--concurrency", "8"))
    assert plan["kv"]["per_gpu_bytes"] == plan["kv"]["stored_bytes"] == 35_136
    weights_per_gpu = 670.9 / 8
    assert plan["hbm"]["weights_gb"] == pytest.approx(weights_per_gpu, rel=0.01)
    assert plan["hbm"]["kv_tokens"] == int((141 * 0.9 - plan["hbm"]["weights_gb"] - 8) * 1e9 // 35_136)
    assert plan["r2_check"] is None    # R2's figures belong to the base profile's own model


def test_sweep_writes_a_plot_and_links_help_where_ssds_cannot(run, tmp_path):
    plot = tmp_path / "links.png"
    sweep = data(run("-o", "json", "plan", "--profile", R2, "--context", "128k", "--concurrency", "16",
                           "--slo", "ttft_p50<=14s", "--sweep", "links=1..3", "--plot", str(plot)))
    ttfts = [p["ttft_p50_s"] for p in sweep["points"]]
    assert ttfts[0] > ttfts[1] >= ttfts[2] and sweep["first_meeting"] == 2
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ssds = data(run("-o", "json", "plan", "--profile", R2, "--context", "128k", "--concurrency", "16",
                          "--sweep", "ssds=2..3", "--plot", str(tmp_path / "ssds.png")))
    assert ssds["points"][0]["ttft_p50_s"] == ssds["points"][1]["ttft_p50_s"]   # link-bound past 2 SSDs


def test_written_profile_is_taken_by_the_profile_loader_and_serve(run, tmp_path, monkeypatch):
    path = tmp_path / "planned.yaml"
    out = run("plan", "--profile", R2, "--context", "128k", "--concurrency", "16", "--slo", "ttft_p50<=14s",
              "--write-profile", str(path))
    assert out.exit_code == 0, out.output
    profile = load_profile(str(path))
    assert profile.get("tiers", "l2_links") == 2 and profile.get("serving", "max_num_seqs") == 16
    assert profile.get("tiers", "l1_size_gb") == pytest.approx(64 * 16.643, rel=0.01)
    again = run("plan", "--profile", R2, "--context", "128k", "--concurrency", "16", "--write-profile", str(path))
    assert again.exit_code == 2 and "--force" in again.output
    monkeypatch.setenv("FXCTL_SERVE_STATE", str(tmp_path / "state"))
    dry = run("serve", "start", "--profile", str(path), "--local", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "--max-num-seqs 16" in dry.output and "--tensor-parallel-size 8" in dry.output
    tuned = run("-o", "json", "tune", "--target", "virtual", "--profile", str(path), "--workload", "cold-recovery",
                "--prompt-tokens", "32768", "--output-tokens", "16", "--requests-per-client", "1",
                "--concurrency", "4,8", "--slo", "ttft_p50<=14s", "--run-dir", str(tmp_path / "tune"))
    assert tuned.exit_code == 0, tuned.output
    assert data(tuned)["best"]["concurrency"] in (4, 8)


@pytest.mark.parametrize("args, message", [
    (["--context", "128k", "--concurrency", "4"], "give --profile or --model-config"),
    (["--profile", R2, "--context", "lots", "--concurrency", "4"], "cannot read 'lots'"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--slo", "ttft<=3"], "cannot read 'ttft<=3'"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--sweep", "disks=1..3"], "PARAM one of"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--sweep", "ssds=0..3"], "whole number >= 1"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--gpu", "tpu9"], "not a GPU kind"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--gpus", "6"], "do not split into instances"),
    (["--profile", R2, "--context", "8k", "--concurrency", "4", "--kv-dtype", "int3"], "not a vLLM KV cache dtype"),
    (["--profile", "fixed-delays", "--context", "8k", "--concurrency", "4"], "no roofline cost model"),
    (["--model-config", "/nonexistent/config.json", "--context", "8k", "--concurrency", "4"], "no such file"),
])
def test_bad_input_exits_2_and_says_what_is_allowed(run, args, message):
    out = run("plan", *args)
    assert out.exit_code == 2, out.output
    assert message in out.output


def test_contexts_past_the_model_and_loads_past_the_emulator_are_said_not_crashed(run):
    longer = data(run("-o", "json", "plan", "--profile", R2, "--context", "1m", "--concurrency", "4"))
    assert longer["hbm"]["fits"] is False and longer["predictions"] == []
    assert "at most 262,144 tokens per request" in longer["hbm"]["explanation"]
    huge = run("plan", "--profile", R2, "--context", "128k", "--concurrency", "100000")
    assert huge.exit_code == 0 and "more than the emulator holds here" in huge.output
