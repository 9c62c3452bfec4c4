"""Server settings as profile overrides: a readable key per configuration, and profiles written from them.

A setting is `section.key` of a profile (tiers.l1_size_gb, serving.max_num_seqs, serving.offload ...).
A written profile is the source profile with those values replaced; each replaced value's source says
it was tuned and where from, and a comment header records the run (provenance).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import yaml

from fxctl.errors import BadInput

SETTABLE = {"serving.max_num_seqs", "serving.max_num_batched_tokens", "serving.offload", "serving.block_size",
            "serving.gpu_memory_utilization", "tiers.l1_size_gb", "tiers.l2_size_gb", "tiers.chunk_tokens",
            "tiers.l2_backend", "tiers.l1_bandwidth_gbs", "serving.router.policy"}


def settings_key(settings: dict) -> str:
    """'default' or 'l1_size_gb=16,max_num_seqs=32' (sorted; usable as a file name)."""
    if not settings:
        return "default"
    parts = [f"{k.split('.', 1)[1]}={format_value(v)}" for k, v in sorted(settings.items())]
    return ",".join(parts)


def format_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_params(params: tuple[str, ...]) -> list[dict]:
    """('tiers.l1_size_gb=16,64', 'serving.max_num_seqs=16,256') -> every combination, in order."""
    axes = []
    for text in params:
        name, sep, values = text.partition("=")
        name = name.strip()
        if not sep or name not in SETTABLE:
            raise BadInput(f"bad --param {text!r}",
                           f"write SECTION.KEY=V1,V2 with a key among: {', '.join(sorted(SETTABLE))}")
        parsed = [yaml.safe_load(v.strip()) for v in values.split(",") if v.strip()]
        if not parsed:
            raise BadInput(f"--param {name} has no values", "e.g. --param tiers.l1_size_gb=16,64")
        axes.append([(name, v) for v in parsed])
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


def write_profile(source: Path, settings: dict, dest: Path, note: str, header: list[str] | None = None,
                  name: str | None = None) -> Path:
    """The source profile with `settings` applied, validated, written atomically to `dest`."""
    from fxctl.sim.profile import parse_profile

    raw = yaml.safe_load(Path(source).read_text())
    for dotted, value in settings.items():
        section, key = dotted.split(".", 1)
        body = raw.setdefault(section, {})
        old = body.get(key)
        if isinstance(old, dict):
            body[key] = {"value": value, "source": f"tuned ({note}); was {old.get('value')!r}: {old.get('source', '')}"}
        else:
            body[key] = value
    if name:
        raw["name"] = name
        raw["description"] = f"{raw.get('description', '')} [tuned by fxctl tune: {note}]".strip()
    parse_profile(raw, dest)   # refuse to write a profile the emulator would not load
    lines = [f"# written by fxctl tune from {source} ({note})", *(f"# {h}" for h in header or [])]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n" + yaml.safe_dump(raw, sort_keys=False))
    os.replace(tmp, dest)
    return dest
