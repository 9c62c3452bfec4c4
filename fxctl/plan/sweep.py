"""`fxctl plan --sweep`: one parameter over a range, each point served by the emulator in virtual time,
as a table and a plot (matplotlib, like tune's)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from fxctl.errors import BadInput
from fxctl.plan import capacity, predict
from fxctl.plan.capacity import Ask
from fxctl.plan.inputs import Change, with_changes
from fxctl.plan.planner import Plan, Term, kv_of, margin, sized
from fxctl.plan.shape import ModelShape
from fxctl.sim.profile import Profile

# sweep name -> (what it sets, the case it is judged on: cold recovery reads L2, reuse reads L1)
PARAMS = {"ssds": ("tiers.l2_ssd_count", "cold"), "links": ("tiers.l2_links", "cold"),
          "l1-gb": ("tiers.l1_size_gb", "reuse"), "concurrency": ("ask.concurrency", "cold")}
MAX_POINTS = 64


def parse_sweep(spec: str) -> tuple[str, list[float]]:
    name, sep, values = spec.partition("=")
    name = name.strip()
    if not sep or name not in PARAMS:
        raise BadInput(f"--sweep {spec!r}: write PARAM=VALUES", "PARAM one of " + ", ".join(PARAMS)
                       + "; VALUES like 1..8 or 4,8,16")
    if match := re.fullmatch(r"\s*(\d+)\s*\.\.\s*(\d+)\s*", values):
        low, high = int(match.group(1)), int(match.group(2))
        points = list(range(low, high + 1))
    else:
        try:
            points = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise BadInput(f"--sweep {spec!r}: values are numbers", "like 1..8 or 0,64,256") from None
    whole = name != "l1-gb"
    if not points or len(points) > MAX_POINTS or any(p < (1 if whole else 0) for p in points) \
            or (whole and any(p != int(p) for p in points)):
        raise BadInput(f"--sweep {spec!r}: 1 to {MAX_POINTS} values, each "
                       + ("a whole number >= 1" if whole else ">= 0"), "like 1..8 or 0,64,256")
    return name, [int(p) if whole else p for p in points]


def sweep(profile: Profile, shape: ModelShape, ask: Ask, slo: list[Term], param: str, values: list,
          plot: Path) -> dict:
    kv = kv_of(profile, shape)
    key, case = PARAMS[param]
    rows = []
    for value in values:
        point_ask = replace(ask, concurrency=value) if key == "ask.concurrency" else ask
        hbm = capacity.hbm(profile, kv, point_ask)
        tiers = capacity.tiers(profile, kv, point_ask)
        plan = Plan(profile, shape, kv, point_ask, slo, hbm, tiers, capacity.bandwidth(profile, kv, point_ask, None))
        point = sized(profile, plan)
        if key != "ask.concurrency":
            point = with_changes(point, [Change(key, value, f"fxctl plan --sweep {param}")])
        row = {param: value, "case": case, "fits": hbm.fits}
        why = predict.too_large(point_ask)
        if why is not None:
            row["skipped"] = why
        elif point_ask.context + point_ask.output_tokens <= hbm.max_model_len:
            p = predict.predict(point, point_ask, case, kv.stored_bytes)
            row |= {"ttft_p50_s": round(p.ttft_p50_s, 3), "ttft_p90_s": round(p.ttft_p90_s, 3),
                    "output_tps": round(p.output_tps, 2),
                    "meets_slo": margin(slo, p) >= 0 if slo else None}
        rows.append(row)
    met = [r for r in rows if r.get("meets_slo")]
    result = {"emulator": "SIMULATED GPU timing (fxctl sim), not measurements", "param": param, "case": case,
              "slo": [str(t) for t in slo], "points": rows, "first_meeting": met[0][param] if met else None}
    result["plot"] = write_plot(result, plot)
    if result["plot"] is None:
        result["plot_note"] = ("no plot: matplotlib is not installed (pip install 'fxctl[plots]')"
                               if not has_matplotlib() else "no plot: no point could be emulated")
    return result


def has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def write_plot(result: dict, path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    points = [r for r in result["points"] if "ttft_p50_s" in r]
    if not points:
        return None
    x = [r[result["param"]] for r in points]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(x, [r["ttft_p50_s"] for r in points], "o-", label="TTFT p50")
    left.plot(x, [r["ttft_p90_s"] for r in points], "s--", label="TTFT p90", alpha=0.7)
    for term in result["slo"]:
        if term.startswith("ttft_p50<="):
            left.axhline(float(term.split("<=")[1].rstrip("s")), color="red", linestyle=":", label=f"SLO {term}")
    left.set_xticks(x)
    left.set_xlabel(result["param"])
    left.set_ylabel("TTFT (s, emulated)")
    right = left.twinx()
    right.plot(x, [r["output_tps"] for r in points], "^-", color="green", label="output tok/s")
    right.set_ylabel("output tok/s (emulated)")
    lines = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = left.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    left.legend(lines, labels, loc="best", fontsize=8)
    left.set_title(f"fxctl plan --sweep {result['param']} ({result['case']}; SIMULATED GPU timing)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.resolve())
