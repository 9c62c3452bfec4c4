"""fxctl tune: the search against the full grid (emulator engine in virtual time), and the whole command over
real HTTP against `fxctl sim serve` started by the tuner itself (trials, resume, outputs, baseline)."""

import csv
import json

import pytest
from click.testing import CliRunner

from benchmarks.search_cost import compare, measured_grid
from fxctl.cli import cli
from fxctl.sim.profile import load_profile
from fxctl.tune.search import Observation, bracket_then_bisect, drive, full_grid

GRID = (1, 2, 4, 6, 8, 12, 16, 20, 24, 32)


@pytest.mark.parametrize("profile", ["mi308x-qwen3-coder-480b-tp8", "atlas910b-70b", "lab"])
def test_search_finds_the_grid_best_with_fewer_trials(profile):
    results = measured_grid(profile, GRID)
    # SLOs as multiples of the profile's unloaded TTFT p50: they bite at different points of the grid
    for factor in (1.2, 1.5, 2.0, 3.0):
        outcome = compare(results, factor, GRID)
        assert outcome["grid_best"] is not None, (profile, factor)
        assert outcome["chosen"] is not None and outcome["chosen"].feasible
        assert outcome["gap_pct"] <= 5.0, (profile, outcome["slo"], outcome)
        assert outcome["trials"] < len(GRID), (profile, outcome["slo"], outcome["trials"])


def test_search_is_a_generator_that_receives_observations():
    search = bracket_then_bisect(GRID, start=4)
    asked = [next(search)]
    limit = 13   # throughput rises with c; the SLO holds up to c=13
    try:
        while True:
            c = asked[-1]
            asked.append(search.send(Observation(c, float(c), (limit - c) / limit)))
    except StopIteration as stop:
        chosen = stop.value
    assert chosen.concurrency == 12 and asked[:4] == [4, 8, 16, 12]
    assert len(asked) == len(set(asked))
    everything, seen = drive(full_grid(GRID), lambda c: Observation(c, float(c), (limit - c) / limit))
    assert everything.concurrency == 12 and len(seen) == len(GRID)


def tune(args, run_dir):
    result = CliRunner().invoke(cli, ["-o", "json", "tune", *args, "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


LAB = ["--target", "sim", "--profile", "lab", "--workload", "cold-recovery", "--prompt-tokens", "2048",
       "--output-tokens", "16", "--requests-per-client", "2", "--time-scale", "0.01", "--concurrency", "1,2,4,8,16",
       "--slo", "ttft_p50<=0.45s", "--time-limit", "60"]


def test_tune_over_http_writes_every_output_and_resumes_without_repeating(tmp_path):
    run_dir = tmp_path / "run"
    summary, err = tune([*LAB, "--param", "serving.max_num_seqs=2,64", "--baseline", "no-offload"], run_dir)
    trials = summary["trials"]
    # outer loop: two server configurations, each started once from its own profile
    assert {t["settings"] for t in trials if t["kind"] == "search"} == {"max_num_seqs=2", "max_num_seqs=64"}
    best_key = summary["best"]["settings_key"]
    assert sorted(p.name for p in (run_dir / "profiles").iterdir()) == sorted(
        ["max_num_seqs=2.yaml", "max_num_seqs=64.yaml", f"{best_key},offload=off.yaml"])
    # the best point is the highest throughput among the trials that met the SLO
    feasible = [t for t in trials if t["kind"] == "search" and t["feasible"]]
    top = max(feasible, key=lambda t: t["output_throughput"])
    assert summary["best"]["concurrency"] == top["concurrency"]
    assert summary["best"]["output_throughput"] == pytest.approx(top["output_throughput"])
    # every trial has its own file; the outputs exist; progress went to stderr
    assert len(list((run_dir / "trials").glob("*.json"))) == len(trials) == summary["trials_measured_now"]
    rows = list(csv.DictReader(open(run_dir / "trials.csv")))
    assert len(rows) == len(trials) and (run_dir / "tune.png").stat().st_size > 10_000
    assert "[1/~" in err and "TTFT p50" in err and "tok/s" in err
    tuned = load_profile(summary["files"]["profile"])
    assert tuned.get("serving", "max_num_seqs") == summary["best"]["settings"].get("serving.max_num_seqs")
    assert "tune" in tuned.description
    # baseline: the same concurrency without offload recomputes the prefix the tier would have loaded
    base = summary["baseline"]
    assert base["concurrency"] == summary["best"]["concurrency"]
    assert base["ttft_p50_s"]["no_offload"] > base["ttft_p50_s"]["tuned"] and base["ttft_p50_s"]["change_pct"] < 0

    # resume: nothing is measured again
    again, _ = tune(["--resume", str(run_dir)], tmp_path / "unused")
    assert again["trials_measured_now"] == 0 and again["trials_resumed"] == len(trials)
    assert again["best"] == summary["best"]

    # a run cut short (one trial file missing, as after Ctrl-C) measures only what is missing. The missing
    # point is the search's first (c=4, well inside the SLO): measured again on the wall clock it comes out a
    # little different, and the search usually takes the same path; on a loaded machine (seen once, 4 of the
    # 5 kept reused) its figures may lead the search to a point no run measured, which it then measures. Either
    # way no kept trial is measured again (their files untouched) and the missing one is
    victim = (run_dir / "trials" / "max_num_seqs=64__search__c0004.json")
    victim.unlink()
    kept = {p: p.stat().st_mtime_ns for p in (run_dir / "trials").glob("*.json")}
    assert len(kept) == len(trials) - 1
    partial, _ = tune(["--resume", str(run_dir)], tmp_path / "unused")
    assert 1 <= partial["trials_resumed"] <= len(kept), partial
    assert victim.exists() and partial["trials_measured_now"] >= 1
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in kept.items())


def test_tune_refuses_bad_input(tmp_path):
    from fxctl.errors import BadInput

    for args in (["--slo", "ttft<=3", "--run-dir", str(tmp_path / "x")], ["--resume", str(tmp_path / "nothing")],
                 ["--slo", "ttft_p50<=1s", "--param", "gpu.hbm_gb=1,2", "--run-dir", str(tmp_path / "y")]):
        result = CliRunner().invoke(cli, ["tune", *args])
        assert isinstance(result.exception, BadInput), (args, result.output)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_ctrl_c_leaves_a_resumable_run_and_stops_the_server(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.ctrl_c import sigint_as_in_a_terminal

    run_dir = tmp_path / "cut"
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
    # every point of a grid whose trials grow with concurrency: after the first trial some 6 s of work remain
    # (3 with a 1..64 grid, under 1 s with the search), so a test process starved by a busy machine still
    # interrupts a running tuner
    argv = [*LAB[:LAB.index("--concurrency")], "--grid", "--concurrency", "1,2,4,8,16,32,64,128",
            *LAB[LAB.index("--slo"):]]
    proc = subprocess.Popen([sys.executable, "-m", "fxctl", "tune", *argv, "--run-dir", str(run_dir)], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((run_dir / "trials").glob("*.json")):
        time.sleep(0.05)
    assert proc.poll() is None, f"the tuner ended (exit {proc.returncode}) before the test could interrupt it"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "--resume" in err
    finished = {p.name for p in (run_dir / "trials").glob("*.json")}
    assert finished and not list((run_dir / "trials").glob("*.tmp"))
    assert processes_naming(run_dir) == []
    summary, _ = tune(["--resume", str(run_dir)], tmp_path / "unused")
    assert summary["trials_resumed"] == len(finished)
    assert summary["trials_measured_now"] == summary["trials_total"] - len(finished)


def processes_naming(path) -> list[str]:
    """Processes whose command line holds `path` (the tuner's servers take their profile from the run dir)."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            continue
    return found


def test_tune_a_running_server_by_url_on_the_wall_clock(tmp_path):
    """--target url: load only, the client's wall clock; fixed delays make TTFT grow with concurrency
    (a request arriving during another's 100 ms prefill step waits for the next one)."""
    from fxctl.tune.server import ServerProcess, sim_argv

    with ServerProcess(sim_argv("fixed-delays", 1.0)) as server:
        summary, _ = tune(["--target", "url", "--url", server.url, "--workload", "long-context", "--prompt-tokens",
                           "64", "--output-tokens", "8", "--requests-per-client", "2", "--concurrency", "1,2,4,8",
                           "--start", "1", "--slo", "ttft_p50<=10s"], tmp_path / "url")
    assert summary["clock"] == "wall"
    search = [t for t in summary["trials"] if t["kind"] == "search"]
    assert [t["concurrency"] for t in search] == [1, 2, 4, 8]       # the SLO holds all the way up
    assert summary["best"]["concurrency"] == 8
    assert search[0]["median_ttft_ms"] >= 100 and search[-1]["output_throughput"] > 3 * search[0]["output_throughput"]


def test_repeats_only_where_the_slo_decision_is_close():
    from fxctl.tune.search import with_repeats

    asked = []
    noise = iter([0.0, -0.2, 0.1] + [0.0] * 50)   # runs at c=12: margins 0.08, -0.12, 0.18

    def measure(c):
        asked.append(c)
        return Observation(c, float(c), (13 - c) / 13 + (next(noise) if c == 12 else 0.0))

    chosen, _seen = drive(with_repeats(bracket_then_bisect(GRID, start=4), close=0.15, most=3), measure)
    assert asked.count(4) == asked.count(8) == asked.count(16) == 1   # clear decisions: measured once
    assert asked.count(12) == 3                                       # close to the bound: three runs
    assert chosen.concurrency == 12 and chosen.runs == 3 and chosen.margin_min < 0 < chosen.margin_max
