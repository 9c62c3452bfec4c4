"""Recipe-level golden tests: a host's real fact outputs in (captured from the lab), the plan out.

A case file (tests/golden/plans/*.json) holds the inventory, the host, the recipe, every fact's raw output
and exit code as captured, and the expected steps with their commands. Replaying parses each output with
the fact's own parser and plans: no host, no SSH. Capture a new case from a running lab with
`python -m tests.plan_golden capture CASE RECIPE HOST INVENTORY`; FXCTL_UPDATE_GOLDEN=1 rewrites the
expected side and fails (tests/golden.py's check_golden; review the diff).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fxctl.inventory import load_inventory_text
from fxctl.provision.initiator import ConnectRecipe, FilesystemRecipe, IdentityRecipe, RaidRecipe
from fxctl.provision.target import TargetRecipe
from fxctl.provision.teardown import InitiatorTeardown, TargetTeardown
from tests.golden import check_golden

PLANS = Path(__file__).parent / "golden" / "plans"


def make_recipe(name: str, inventory, options: dict):
    arrays, wipe = inventory.arrays, options.get("wipe", False)
    hostnqns = {h.name: h.hostnqn for h in inventory.hosts.values() if h.hostnqn}
    return {"identity": lambda: IdentityRecipe(), "target": lambda: TargetRecipe(arrays, hostnqns, wipe),
            "connect": lambda: ConnectRecipe(arrays), "raid": lambda: RaidRecipe(arrays, wipe),
            "filesystem": lambda: FilesystemRecipe(arrays, wipe),
            "initiator-teardown": lambda: InitiatorTeardown(arrays, wipe),
            "target-teardown": lambda: TargetTeardown(arrays, tuple(a.name for a in arrays), wipe)}[name]()


def replay(case: dict) -> list[dict]:
    inventory = load_inventory_text(case["inventory"])
    host = inventory.hosts[case["host"]]
    recipe = make_recipe(case["recipe"], inventory, case.get("options", {}))
    facts = {name: fact.parse(case["outputs"][name]["stdout"], case["outputs"][name]["exit_code"])
             for name, fact in recipe.facts(host).items()}
    return [{"step": s.name, "commands": [c.masked() for c in s.commands],
             **({"refusal": s.refusal} if s.refusal else {})} for s in recipe.plan(host, facts)]


def check_case(path: Path) -> None:
    case = json.loads(path.read_text())
    check_golden(path, case, {"steps": replay(case)}, indent=1)


def capture(case_name: str, recipe_name: str, host_name: str, inventory_path: str, **options) -> Path:
    from fxctl.remote.session import open_session

    text = Path(inventory_path).read_text()
    inventory = load_inventory_text(text)
    host = inventory.hosts[host_name]
    recipe = make_recipe(recipe_name, inventory, options)
    outputs = {}
    with open_session(host) as session:
        for name, fact in recipe.facts(host).items():
            result = session.run(fact.command(), sudo=fact.sudo)
            outputs[name] = {"stdout": result.stdout, "exit_code": result.exit_code}
    case = {"recipe": recipe_name, "host": host_name, "options": options, "inventory": text,
            "outputs": outputs, "steps": []}
    path = PLANS / f"{case_name}.json"
    case["steps"] = replay(case)
    path.write_text(json.dumps(case, indent=1) + "\n")
    return path


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "capture":
        print(capture(*sys.argv[2:6], **({"wipe": True} if "--wipe" in sys.argv else {})))
    else:
        sys.exit(__doc__)
