"""Golden plans of `fxctl net apply` per NIC driver: facts in (parsed from real tool output where the
case names a file), steps and commands out. tests/golden/net/*.json:

  {"source": "...", "network": {<inventory network section without interfaces>},
   "interface": {"netdev": ..., "rdma_device": ..., "address": ..., "soft_roce": ...},
   "driver": "dcb|mlx5|bnxt", "kernel_driver": "...", "persisted": true,
   "facts": {"eth1:pfc": <value> | {"$parse": "module:Fact", "args": {...}, "stdout_file": "...", "exit_code": 0}},
   "steps": {"<step>": {"status": "change|ok|unsupported|refused", "commands": [...], "reason": "..."}}}

FXCTL_UPDATE_GOLDEN=1 rewrites the expected side and fails (then review the diff).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxctl.inventory.model import InterfaceSpec, build_network
from fxctl.net.desired import Knobs, Nic, resolve_interfaces
from fxctl.net.persist import persisted_files
from fxctl.net.recipe import NetRecipe
from fxctl.ops.net import is_unsupported
from fxctl.output import to_plain
from tests.golden import GOLDEN, check_golden, load_target

CASES = sorted((GOLDEN / "net").glob("*.json"))
HOST = "h1"


class _Host:
    name = HOST


def fact_value(raw):
    if isinstance(raw, dict) and "$parse" in raw:
        fact = load_target(raw["$parse"])(**raw.get("args", {}))
        stdout = (GOLDEN / "facts" / raw["stdout_file"]).read_text() if "stdout_file" in raw else raw["stdout"]
        return fact.parse(stdout, raw.get("exit_code", 0))
    return raw


def step_outcome(step) -> dict:
    if step.refusal:
        return {"status": "refused", "reason": step.refusal}
    if step.changes:
        return {"status": "change", "commands": [c.masked() for c in step.commands]}
    return {"status": "unsupported" if is_unsupported(step.reason) else "ok", "reason": step.reason}


def plan_case(case: dict) -> dict:
    network = build_network({**case["network"], "interfaces": {HOST: [case["interface"]]}})
    facts = {name: fact_value(raw) for name, raw in case["facts"].items()}
    spec = resolve_interfaces([InterfaceSpec(host=HOST, **case["interface"])], facts["rdma"])[0]
    nic = Nic(spec, case["driver"], case.get("kernel_driver"))
    knobs = Knobs.of(network)
    recipe = NetRecipe(knobs, {HOST: [nic]})
    for path, (content, _) in persisted_files(knobs, [nic]).items():
        facts.setdefault(f"file:{path}", content if case.get("persisted", True) else None)
    facts.setdefault("unit", "enabled" if case.get("persisted", True) else "disabled")
    missing = set(recipe.facts(_Host())) - set(facts)
    assert not missing, f"the case lacks facts the recipe reads: {sorted(missing)}"
    return {step.name: step_outcome(step) for step in recipe.plan(_Host(), facts)}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_net_plan_golden(path: Path):
    case = json.loads(path.read_text())
    check_golden(path, case, {"steps": to_plain(plan_case(case))})


def test_every_driver_has_a_fresh_and_a_converged_case():
    kinds = {(json.loads(p.read_text())["driver"], "converged" in p.stem) for p in CASES}
    assert kinds >= {(d, c) for d in ("dcb", "mlx5", "bnxt") for c in (True, False)}


def test_converged_cases_plan_no_command():
    for path in CASES:
        if "converged" in path.stem:
            steps = plan_case(json.loads(path.read_text()))
            assert not [n for n, s in steps.items() if s["status"] == "change"], path.name
