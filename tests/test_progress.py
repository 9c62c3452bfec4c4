"""The hosts-answered display: in place on a terminal, periodic lines on a pipe, never on stdout."""

from __future__ import annotations

import io
import json
from contextlib import contextmanager

from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.errors import RemoteError
from fxctl.inventory.model import Host
from fxctl.remote import pool, progress
from fxctl.remote.session import RunResult


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_pipe_gets_a_line_per_period_and_a_final_count():
    clock, out = Clock(), io.StringIO()
    wave = progress.Wave(64, out, tty=False, every_s=10, clock=clock)
    for _ in range(30):
        wave.answered(True)
    wave.show()
    assert out.getvalue() == ""          # a short wave writes nothing
    clock.now += 10.5
    wave.answered(False)
    wave.show()
    wave.show()                          # once per period, however often it is asked
    assert out.getvalue() == "hosts answered 31/64, 1 failed (10.5 s)\n"
    clock.now += 10
    wave.show()
    wave.close()
    assert out.getvalue().splitlines()[1:] == ["hosts answered 31/64, 1 failed (20.5 s)",
                                               "hosts answered 31/64, 1 failed (20.5 s)"]
    assert "\r" not in out.getvalue()


def test_short_pipe_wave_writes_nothing_at_all():
    out = io.StringIO()
    wave = progress.Wave(3, out, tty=False, every_s=10, clock=Clock())
    wave.answered(True)
    wave.close()
    assert out.getvalue() == ""


def test_terminal_line_is_redrawn_in_place_then_erased():
    clock, out = Clock(), io.StringIO()
    wave = progress.Wave(4, out, tty=True, every_s=10, clock=clock)
    wave.answered(True)
    assert out.getvalue() == ""          # not before DRAW_AFTER_S: no flicker on fast waves
    clock.now += 1
    wave.answered(False)
    wave.answered(True)
    wave.close()
    assert out.getvalue() == ("\r\x1b[Khosts answered 2/4, 1 failed (1.0 s)"
                              "\r\x1b[Khosts answered 3/4, 1 failed (1.0 s)\r\x1b[K")


def test_a_broken_stream_does_not_fail_the_run():
    out = io.StringIO()
    out.close()
    wave = progress.Wave(1, out, tty=True, every_s=10, clock=Clock())
    wave.started -= 5
    wave.answered(True)
    wave.close()


class FakeSession:
    def __init__(self, host: Host):
        self.host = host

    def run(self, command, **kwargs):
        return RunResult(self.host.name, command.render(), 0, "", "", 0.0)


def fake_open_session(down: set[str]):
    @contextmanager
    def open_session(host: Host, journal=None):
        if host.name in down:
            raise RemoteError(f"{host.name}: cannot connect to {host.address}:{host.port}: refused")
        yield FakeSession(host)
    return open_session


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address="127.0.0.1", port=2200 + i) for i in range(n)]


def test_every_answer_of_a_fan_out_reaches_the_display(monkeypatch):
    monkeypatch.setattr(pool, "open_session", fake_open_session({"h1", "h4"}))
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0)
    out = io.StringIO()
    with progress.show_progress(progress.Display(out, tty=True)):
        outcomes = pool.run_on_hosts(hosts(6), lambda s: s.host.name)
    assert [o.ok for o in outcomes.values()] == [True, False, True, True, False, True]
    drawn = out.getvalue().split("\r\x1b[K")
    assert drawn[-1] == ""               # erased at the end
    assert any(d.startswith("hosts answered 6/6, 2 failed") for d in drawn)
    assert not pool.run_on_hosts([], lambda s: 1)   # no hosts: no wave


def test_library_is_silent_without_a_display(monkeypatch, capsys):
    monkeypatch.setattr(pool, "open_session", fake_open_session(set()))
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0)
    pool.run_on_hosts(hosts(3), lambda s: 1)
    assert capsys.readouterr() == ("", "")


def test_cli_progress_goes_to_stderr_and_json_stdout_stays_clean(monkeypatch, tmp_path):
    monkeypatch.setattr(pool, "open_session", fake_open_session({"h2"}))
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0)

    class Terminal(progress.Display):      # CliRunner's stderr is no terminal; pretend it is one
        def __init__(self, stream, **kw):
            super().__init__(stream, tty=True)

    monkeypatch.setattr(progress, "Display", Terminal)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("version: 1\nhosts:\n" + "".join(
        f"  h{i}: {{address: 127.0.0.1, port: {2200 + i}}}\n" for i in range(4)))
    result = CliRunner().invoke(cli, ["-i", str(inventory), "-o", "json", "inventory", "ping"])
    assert result.exit_code == 1, result.output
    assert [h["ok"] for h in json.loads(result.stdout)] == [True, True, False, True]
    assert "hosts answered 4/4, 1 failed" in result.stderr
