"""Reading measured values out of a stage's JSON: a small path language plus reductions and comparisons.

Path: dot-separated keys; `[*]` every item of a list; `[key=value]` the items whose key equals value;
`[N]` one item. Examples: `verify[check=sequential read].read_mb_s`, `ports[*].state`, `best.concurrency`.
"""

from __future__ import annotations

import operator
import re
import statistics
from typing import Any

_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
       "!=": operator.ne}
REDUCERS = {
    "first": lambda xs: xs[0] if xs else None,
    "min": lambda xs: min(xs) if xs else None,
    "max": lambda xs: max(xs) if xs else None,
    "sum": lambda xs: sum(xs),
    "mean": lambda xs: statistics.fmean(xs) if xs else None,
    "count": len,
    "count_set": lambda xs: sum(1 for x in xs if x is not None),
    "all": lambda xs: bool(xs) and all(xs),
    "any": any,
}


def parse_path(path: str) -> list[tuple[str, str]]:
    """'a.b[*].c[k=v]' -> [('key','a'),('key','b'),('all',''),('key','c'),('filter','k=v')]."""
    parts = []
    for key, bracket in _TOKEN.findall(path):
        if key:
            parts.append(("key", key))
        elif bracket == "*":
            parts.append(("all", ""))
        elif bracket.lstrip("-").isdigit():
            parts.append(("index", bracket))
        elif "=" in bracket:
            parts.append(("filter", bracket))
        else:
            raise ValueError(f"bad path part [{bracket}] in {path!r}")
    if not parts:
        raise ValueError(f"empty path {path!r}")
    return parts


def select(data: Any, path: str) -> list[Any]:
    """Every value the path reaches (a list, possibly empty)."""
    values = [data]
    for kind, arg in parse_path(path):
        nxt: list[Any] = []
        for value in values:
            if kind == "key" and isinstance(value, dict) and arg in value:
                nxt.append(value[arg])
            elif kind == "all" and isinstance(value, list):
                nxt.extend(value)
            elif kind == "index" and isinstance(value, list) and -len(value) <= int(arg) < len(value):
                nxt.append(value[int(arg)])
            elif kind == "filter" and isinstance(value, list):
                key, _, wanted = arg.partition("=")
                nxt.extend(v for v in value if isinstance(v, dict) and str(v.get(key)) == wanted)
        values = nxt
    return values


def measure(data: Any, path: str, reduce: str = "first", equals: Any = None) -> Any:
    """Select, optionally keep values equal to `equals` (then 'count' counts them), and reduce."""
    values = select(data, path)
    if equals is not None:
        values = [v for v in values if v == equals]
    return REDUCERS[reduce](values)


def compare(value: Any, op: str, threshold: Any) -> bool:
    if value is None:
        return False
    try:
        return bool(OPS[op](value, threshold))
    except TypeError:
        return False
