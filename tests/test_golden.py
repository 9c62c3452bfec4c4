"""Every golden file under tests/golden: operations (facts in, commands out) and fact parsers."""

import json

import pytest

from tests.golden import check_fact_case, check_golden, check_golden_file, check_op_case, golden_files


@pytest.mark.parametrize("path", golden_files("ops"), ids=lambda p: p.stem)
def test_operation_golden(path):
    check_op_case(path)


@pytest.mark.parametrize("path", golden_files("facts"), ids=lambda p: p.stem)
def test_fact_golden(path):
    check_fact_case(path)


def test_a_golden_rewritten_under_the_update_variable_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FXCTL_UPDATE_GOLDEN", "1")
    whole, keyed = tmp_path / "whole.json", tmp_path / "keyed.json"
    whole.write_text(json.dumps({"argv": ["old"]}))
    keyed.write_text(json.dumps({"kwargs": {}, "commands": ["old"]}))
    with pytest.raises(pytest.fail.Exception, match="rewrote"):
        check_golden_file(whole, {"argv": ["new"]})
    with pytest.raises(pytest.fail.Exception, match="rewrote"):
        check_golden(keyed, json.loads(keyed.read_text()), {"commands": ["new"]})
    assert json.loads(whole.read_text()) == {"argv": ["new"]}
    assert json.loads(keyed.read_text())["commands"] == ["new"]
    check_golden_file(whole, {"argv": ["new"]})   # equal now: nothing rewritten, passes


def test_a_missing_golden_fails_without_the_update_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("FXCTL_UPDATE_GOLDEN", raising=False)
    with pytest.raises(AssertionError, match="differs"):
        check_golden_file(tmp_path / "none.json", {"argv": []})
    assert not (tmp_path / "none.json").exists()
