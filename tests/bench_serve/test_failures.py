"""`fxctl bench serve` tells a script when requests failed (issue 18 #11): every request failing (nothing
listening) is exit 1, after the result is printed and written; --max-failed-fraction sets the share tolerated."""

import json
import socket

import pytest

from fxctl.errors import ExitCode
from fxctl.loadgen.metrics import failed_too_many
from tests.support.cli import run_main


@pytest.fixture
def closed_url():
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def bench(url, monkeypatch, capsys, *extra):
    args = ["-o", "json", "bench", "serve", "--url", url, "--requests", "3", "--model", "m", "--prompt-tokens", "16",
            "--output-tokens", "2", "--time-limit", "30", *extra]
    return run_main(args, monkeypatch, capsys)


def test_every_request_failing_exits_1_and_still_writes_the_result(closed_url, monkeypatch, capsys, tmp_path):
    code, out, err = bench(closed_url, monkeypatch, capsys, "--result-file", str(tmp_path / "r.json"))
    assert code == ExitCode.HOST_FAILED, err
    assert json.loads(out)["failed"] == 3 and json.loads((tmp_path / "r.json").read_text())["completed"] == 0
    assert "3 of 3 requests failed" in err and "Cannot connect" in err


def test_a_tolerated_share_of_failures_exits_0(closed_url, monkeypatch, capsys):
    code, _out, err = bench(closed_url, monkeypatch, capsys, "--max-failed-fraction", "1")
    assert code == 0, err


@pytest.mark.parametrize("completed,failed,fraction,verdict", [
    (10, 0, None, False), (9, 1, None, False), (0, 3, None, True), (0, 0, None, True),
    (9, 1, 0.0, True), (9, 1, 0.1, False), (8, 2, 0.1, True), (0, 3, 1.0, False)])
def test_the_failure_threshold(completed, failed, fraction, verdict):
    result = {"completed": completed, "failed": failed, "errors": {"boom": failed} if failed else {}}
    assert bool(failed_too_many(result, fraction)) is verdict
