"""`fxctl plan --write-profile`: the planned profile as YAML, every parameter with its source, read back
by the same loader `fxctl serve`, `fxctl tune` and `fxctl sim` use before it is kept."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from fxctl.plan.inputs import Change, with_changes
from fxctl.plan.planner import Plan
from fxctl.sim.profile import SECTIONS, load_profile


def planned(plan: Plan):
    found = plan.recommended or {}
    if not found.get("met_by") or found.get("ssds") is None:
        return plan.profile
    return with_changes(plan.profile, [
        Change("tiers.l2_ssd_count", found["ssds"], "fxctl plan: the least SSDs that meet the SLO (emulated)"),
        Change("tiers.l2_links", found["links"], "")])


def as_document(plan: Plan, name: str) -> dict:
    profile = planned(plan)
    slo = f", SLO {', '.join(map(str, plan.slo))}" if plan.slo else ""
    doc: dict = {"name": name,
                 "description": f"planned by fxctl plan from {profile.name}: {plan.ask.concurrency} x "
                                f"{plan.ask.context:,} tokens{slo}",
                 "emulator": "simulated GPU timing (roofline cost model)", "cost_model": profile.cost_model}
    for section in SECTIONS:
        params = profile.sections.get(section)
        if not params:
            continue
        out: dict = {}
        for key, param in params.items():
            value = param.value
            entry = {"value": value, "source": param.source} if param.source else value
            head, _, tail = key.partition(".")
            if tail:
                out.setdefault(head, {})[tail] = entry
            else:
                out[key] = entry
        doc[section] = out
    doc["serving"]["max_num_seqs"] = plan.ask.concurrency
    return doc


def write_profile(plan: Plan, path: Path) -> Path:
    text = "# written by fxctl plan; EMULATOR PROFILE: GPU timing from it is simulated\n" \
        + yaml.safe_dump(as_document(plan, path.stem), sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        load_profile(tmp)     # the loader serve and tune use must take it, or nothing is written
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
