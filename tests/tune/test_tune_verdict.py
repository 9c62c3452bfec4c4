"""tune's verdict (issue 18 #9): a negative or non-finite latency is an invalid measurement, never an SLO met,
and a run where no point meets the SLO exits non-zero (ExitCode.SLO_NOT_MET) after writing its outputs."""

import json

import pytest

from fxctl.errors import ExitCode
from fxctl.loadgen.metrics import RequestRecord, summarize
from fxctl.tune.sweep import Tuner
from tests.support.cli import run_main


class FakeDriver:
    """Answers every trial with the same per-request TTFT (seconds), as a server reporting model time would."""

    def __init__(self, ttft_s: float):
        self.ttft_s = ttft_s

    def measure(self, settings, concurrency, load, progress):
        records = [RequestRecord(True, 100, 8, ttft=self.ttft_s, e2el=self.ttft_s + 0.1, itl=[0.01] * 7)
                   for _ in range(concurrency)]
        return summarize(records, 1.0, load.slo)

    def close(self):
        pass


def run_tune(monkeypatch, capsys, tmp_path, ttft_s: float) -> tuple[int, str, str]:
    monkeypatch.setattr(Tuner, "driver", lambda self: FakeDriver(ttft_s))
    return run_main(["-o", "json", "tune", "--target", "url", "--url", "http://127.0.0.1:9", "--slo", "ttft_p50<=1s",
                     "--concurrency", "1,2,4", "--start", "1", "--run-dir", str(tmp_path / "run")], monkeypatch, capsys)


@pytest.mark.parametrize("ttft_s", [-0.5, float("nan"), float("inf")])
def test_an_impossible_latency_is_an_invalid_measurement_not_a_pass(monkeypatch, capsys, tmp_path, ttft_s):
    code, _out, err = run_tune(monkeypatch, capsys, tmp_path, ttft_s)
    assert code == ExitCode.SLO_NOT_MET, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["best"] is None
    assert summary["trials"] and not any(t["feasible"] for t in summary["trials"])
    assert all(t["invalid"] for t in summary["trials"])
    assert "no point met the SLO" in err and "invalid measurement" in err


def test_no_point_meeting_the_slo_exits_non_zero_after_writing_outputs(monkeypatch, capsys, tmp_path):
    code, out, err = run_tune(monkeypatch, capsys, tmp_path, 5.0)
    assert code == ExitCode.SLO_NOT_MET, err
    assert json.loads(out)["best"] is None       # the summary is still printed
    assert (tmp_path / "run" / "summary.json").exists() and (tmp_path / "run" / "trials.csv").exists()


def test_a_point_that_meets_the_slo_exits_zero(monkeypatch, capsys, tmp_path):
    code, out, err = run_tune(monkeypatch, capsys, tmp_path, 0.5)
    assert code == 0, err
    assert json.loads(out)["best"]["concurrency"] == 4
