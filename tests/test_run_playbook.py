"""`fxctl run`: the path language, playbook validation, and real runs of a small playbook."""

from __future__ import annotations

import json

import pytest

from fxctl.cli import main
from fxctl.errors import BadInput
from fxctl.playbook.measures import compare, measure, select
from fxctl.playbook.model import load_playbook

DATA = {"verify": [{"host": "a", "check": "sequential read", "ok": True, "read_mb_s": 30.5},
                   {"host": "b", "check": "sequential read", "ok": True, "read_mb_s": 12.0},
                   {"host": "a", "check": "mounted", "ok": True}],
        "best": {"concurrency": 16}}


def test_paths_filters_and_reductions():
    assert select(DATA, "best.concurrency") == [16]
    assert measure(DATA, "verify[check=sequential read].read_mb_s", "min") == 12.0
    assert measure(DATA, "verify[*].ok", "all") is True
    assert measure(DATA, "verify[*].host", "count", equals="a") == 2
    assert measure(DATA, "verify[0].host") == "a"
    assert measure(DATA, "nothing.here") is None
    assert measure({"p": [{"g": 1}, {"g": None}]}, "p[*].g", "count_set") == 1
    assert compare(12.0, ">=", 10) and not compare(None, ">=", 0) and not compare("x", ">", 1)


SMOKE = """\
version: 1
name: smoke
vars: {example: examples/inventory.yaml, hosts: 4}
stages:
  - name: valid
    fxctl: [-i, "${example}", inventory, check]
    gate:
      name: G0 inventory
      checks:
        - {measure: hosts, path: hosts, op: ">=", value: HOSTS}
        - {measure: valid, path: valid, op: "==", value: true}
  - name: shown
    fxctl: [-i, "${example}", inventory, show]
    gate:
      name: G0 hosts
      checks:
        - {measure: initiators, path: "hosts.gpu1.roles[*]", reduce: count, equals: initiator, op: "==", value: 1}
"""


def write(tmp_path, text, hosts=4):
    path = tmp_path / "smoke.yaml"
    path.write_text(text.replace("HOSTS", str(hosts)))
    return path


def run(args, capsys, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    monkeypatch.delenv("FXCTL_INVENTORY", raising=False)
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def test_a_passing_playbook_reports_every_gate(tmp_path, capsys, monkeypatch, repo_root):
    code, out, _ = run(["-o", "json", "run", str(write(tmp_path, SMOKE)), "--run-dir", str(tmp_path / "r")],
                       capsys, monkeypatch, repo_root)
    data = json.loads(out)
    assert code == 0 and data["passed"]
    checks = [c for s in data["stages"] for c in s["checks"]]
    assert [(c["measure"], c["value"], c["passed"]) for c in checks] == \
        [("hosts", 4, True), ("valid", True, True), ("initiators", 1, True)]
    assert "| valid | G0 inventory | hosts | 4  | >= 4 | pass |" in (tmp_path / "r" / "report.md").read_text()


def test_an_impossible_threshold_fails_showing_the_measured_value(tmp_path, capsys, monkeypatch, repo_root):
    code, out, err = run(["run", str(write(tmp_path, SMOKE, hosts=99)), "--run-dir", str(tmp_path / "r")],
                         capsys, monkeypatch, repo_root)
    assert code == 1
    assert "hosts: measured 4 , needs >= 99" in err
    assert "FAIL" in out and "not run" not in out.split("FAILED")[0].split("shown")[0]
    stages = json.loads((tmp_path / "r" / "report.json").read_text())["stages"]
    assert [s["status"] for s in stages] == ["failed", "not run"]


def test_resume_skips_passed_stages_and_only_runs_one(tmp_path, capsys, monkeypatch, repo_root):
    book = write(tmp_path, SMOKE)
    run_dir = tmp_path / "r"
    assert run(["run", str(book), "--run-dir", str(run_dir)], capsys, monkeypatch, repo_root)[0] == 0
    code, out, _ = run(["-o", "json", "run", str(book), "--resume", str(run_dir)], capsys, monkeypatch, repo_root)
    assert code == 0 and [s["status"] for s in json.loads(out)["stages"]] == ["skipped", "skipped"]
    code, out, _ = run(["-o", "json", "run", str(book), "--only", "shown", "--run-dir", str(tmp_path / "o")],
                       capsys, monkeypatch, repo_root)
    assert [s["status"] for s in json.loads(out)["stages"]] == ["not run", "passed"]


def test_bad_playbooks_name_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nstages:\n  - name: a\n    fxctl: [inventory]\n"
                   "    gate: {name: g, checks: [{measure: m, path: 'a[', op: '~', value: 1}]}\n"
                   "  - name: a\n    fxctl: [x]\n    colour: red\n")
    with pytest.raises(BadInput) as info:
        load_playbook(bad)
    text = info.value.message
    assert f"{bad}:6: stages[0].gate.checks[0].op: '~' is not allowed" in text
    assert f"{bad}:9: stages[1].colour: unknown key" in text
    assert f"{bad}:7: stages[1].name: stage 'a' is defined twice" in text


def test_shipped_playbooks_are_valid(repo_root):
    books = sorted((repo_root / "playbooks").glob("*.yaml"))
    assert {p.stem for p in books} >= {"acceptance", "lab-demo", "teardown"}
    for path in books:
        assert load_playbook(path, builtins={"run_dir": "/tmp/x"}).stages


def test_playbook_shape_errors_have_lines_and_a_list_is_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nstages:\n  - name: a\n    fxctl: [inventory]\n    timeout: '10'\n")
    with pytest.raises(BadInput) as info:
        load_playbook(bad)
    assert f"{bad}:6: stages[0].timeout: must be an integer, got a string" in info.value.message
    bad.write_text("- version: 1\n")
    with pytest.raises(BadInput) as info:
        load_playbook(bad)
    assert f"{bad}:1: must be a mapping, got a list" in info.value.message
