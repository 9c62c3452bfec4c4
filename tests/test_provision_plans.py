"""Provision recipes planned from real fact outputs captured in the lab (see tests/plan_golden.py)."""

import json

import pytest

from tests.plan_golden import PLANS, check_case, replay


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")), ids=lambda p: p.stem)
def test_plan_golden(path):
    check_case(path)


@pytest.mark.parametrize("path", sorted(PLANS.glob("*converged*.json")), ids=lambda p: p.stem)
def test_a_converged_host_plans_nothing(path):
    steps = replay(json.loads(path.read_text()))
    assert steps and all(not s["commands"] and "refusal" not in s for s in steps)
