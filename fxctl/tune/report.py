"""What a tuning run hands back: the best point, every trial as a table and CSV, the gain against the
baseline in the seed's R2 form, plots, and the chosen settings as a profile."""

from __future__ import annotations

import csv
from pathlib import Path

from fxctl.tune.profiles import write_profile
from fxctl.tune.store import write_json

CSV_FIELDS = ("settings", "kind", "concurrency", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
              "median_itl_ms", "output_throughput", "request_throughput", "request_goodput", "completed", "failed",
              "margin", "feasible", "invalid", "resumed")


def trial_row(trial: dict) -> dict:
    r = trial["result"]
    row = {"settings": trial["settings_key"], "kind": trial["kind"], "concurrency": trial["concurrency"],
           "margin": round(trial["margin"], 4), "feasible": trial["feasible"], "invalid": trial.get("invalid", ""),
           "resumed": bool(trial.get("resumed"))}
    for name in CSV_FIELDS:
        if name not in row:
            row[name] = r.get(name)
    return row


def change(before: float, after: float) -> float | None:
    return 100 * (after / before - 1) if before else None


def baseline_comparison(best_trial: dict, baseline: dict) -> dict:
    """R2's form: TTFT p50 and output throughput, no offload against tuned, at the same concurrency."""
    b, t = baseline["result"], best_trial["result"]
    return {"concurrency": best_trial["concurrency"],
            "ttft_p50_s": {"no_offload": b["median_ttft_ms"] / 1000, "tuned": t["median_ttft_ms"] / 1000,
                           "change_pct": change(b["median_ttft_ms"], t["median_ttft_ms"])},
            "output_throughput": {"no_offload": b["output_throughput"], "tuned": t["output_throughput"],
                                  "change_pct": change(b["output_throughput"], t["output_throughput"])}}


def assemble(outcome: dict, trials: list[dict], options: dict, run_dir: Path, measured: int) -> dict:
    best = outcome["best"]
    best_trial = None
    if best:
        best_trial = next(t for t in trials if t["kind"] == "search" and t["settings_key"] == best["settings_key"]
                          and t["concurrency"] == best["chosen"]["concurrency"])
    summary = {
        "run_dir": str(run_dir), "slo": options["slo"], "target": options["target"],
        "profile": options.get("profile"), "workload": options["workload"],
        "clock": trials[0]["result"].get("clock") if trials else None,
        "best": None if not best_trial else {
            "settings": best_trial["settings"], "settings_key": best_trial["settings_key"],
            "concurrency": best_trial["concurrency"], "ttft_p50_s": best_trial["result"]["median_ttft_ms"] / 1000,
            "output_throughput": best_trial["result"]["output_throughput"],
            "request_throughput": best_trial["result"]["request_throughput"]},
        "searches": outcome["searches"],
        "trials_total": len(trials), "trials_measured_now": measured, "trials_resumed": len(trials) - measured,
        "grid_points": len(options["concurrencies"]) * len(outcome["searches"]),
        "baseline": (baseline_comparison(best_trial, outcome["baseline"])
                     if best_trial and outcome["baseline"] else None),
        "trials": [trial_row(t) for t in trials],
    }
    return summary


def write_outputs(summary: dict, trials: list[dict], options: dict, profile_path: Path | None) -> dict:
    run_dir = Path(summary["run_dir"])
    files = {"json": run_dir / "summary.json", "csv": run_dir / "trials.csv"}
    with open(files["csv"], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(summary["trials"])
    plot = write_plot(trials, run_dir / "tune.png", summary)
    if plot:
        files["plot"] = plot
    best = summary["best"]
    if best and profile_path is not None:
        from fxctl.sim.profile import load_profile
        source_name = load_profile(str(profile_path)).name
        files["profile"] = write_profile(
            profile_path, best["settings"], run_dir / f"{source_name}-tuned.yaml",
            note=f"run {run_dir.name}, SLO {summary['slo']}, workload {summary['workload']}",
            name=f"{source_name}-tuned",
            header=[f"best operating point: concurrency {best['concurrency']} at TTFT p50 {best['ttft_p50_s']:.2f} s, "
                    f"{best['output_throughput']:.1f} output tok/s ({summary['clock']} clock)",
                    f"settings tuned: {best['settings_key']}; everything else as in the source profile"])
    summary["files"] = {k: str(v) for k, v in files.items()}
    write_json(files["json"], summary)
    return summary


def write_plot(trials: list[dict], path: Path, summary: dict) -> Path | None:
    """Throughput and TTFT p50 against concurrency, a line per server configuration (Agg backend)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax_tp, ax_ttft) = plt.subplots(1, 2, figsize=(11, 4.2))
    lines: dict[str, list[dict]] = {}
    for t in trials:
        lines.setdefault(t["settings_key"] + (" (baseline)" if t["kind"] == "baseline" else ""), []).append(t)
    for label, points in lines.items():
        points.sort(key=lambda t: t["concurrency"])
        cs = [t["concurrency"] for t in points]
        style = "s--" if "baseline" in label else "o-"
        ax_tp.plot(cs, [t["result"]["output_throughput"] for t in points], style, label=label)
        ax_ttft.plot(cs, [t["result"]["median_ttft_ms"] / 1000 for t in points], style, label=label)
    for limit in summary["slo"].split(","):
        if limit.strip().startswith("ttft_p50<="):
            from fxctl.loadgen.metrics import parse_slo
            ax_ttft.axhline(parse_slo(limit)[0].bound_s, color="red", linewidth=0.8, label="SLO")
    if summary["best"]:
        ax_tp.plot([summary["best"]["concurrency"]], [summary["best"]["output_throughput"]], "r*", markersize=14,
                   label="best")
    ax_tp.set(xlabel="concurrency", ylabel="output tokens/s", title="throughput")
    ax_ttft.set(xlabel="concurrency", ylabel="TTFT p50 (s)", title="time to first token", yscale="log")
    for ax in (ax_tp, ax_ttft):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"fxctl tune: {summary['profile'] or summary['target']}, {summary['workload']}, SLO {summary['slo']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def table_rows(summary: dict) -> list[tuple]:
    best = summary["best"] or {}
    rows = []
    for row in summary["trials"]:
        is_best = row["kind"] == "search" and row["settings"] == best.get("settings_key") \
            and row["concurrency"] == best.get("concurrency")
        rows.append((row["settings"], row["kind"], row["concurrency"], f"{row['median_ttft_ms'] / 1000:.2f}",
                     f"{row['p99_ttft_ms'] / 1000:.2f}", f"{row['median_tpot_ms']:.1f}",
                     f"{row['output_throughput']:.1f}",
                     f"{row['margin']:+.2f}", "yes" if row["feasible"] else "no",
                     ("BEST " if is_best else "") + ("resumed" if row["resumed"] else "")))
    return rows


TABLE_HEADERS = ("settings", "kind", "c", "TTFT p50 s", "TTFT p99 s", "TPOT p50 ms", "out tok/s", "SLO margin",
                 "meets", "note")


def text_summary(summary: dict) -> str:
    lines = [""]
    best = summary["best"]
    if best:
        lines.append(f"best operating point: {best['settings_key']}, concurrency {best['concurrency']}: "
                     f"TTFT p50 {best['ttft_p50_s']:.2f} s, {best['output_throughput']:.1f} output tok/s "
                     f"(SLO {summary['slo']}; {summary['clock']} clock)")
    else:
        lines.append(f"no point met the SLO {summary['slo']}")
    base = summary["baseline"]
    if base:
        t, o = base["ttft_p50_s"], base["output_throughput"]
        lines.append(f"against no offload at concurrency {base['concurrency']}: TTFT p50 {t['no_offload']:.2f} s -> "
                     f"{t['tuned']:.2f} s ({t['change_pct']:+.1f} %), output throughput {o['no_offload']:.1f} -> "
                     f"{o['tuned']:.1f} tok/s ({o['change_pct']:+.1f} %)")
    lines.append(f"trials: {summary['trials_total']} ({summary['trials_measured_now']} measured now, "
                 f"{summary['trials_resumed']} resumed) against a full grid of {summary['grid_points']}")
    lines += [f"{kind}: {path}" for kind, path in summary.get("files", {}).items()]
    return "\n".join(lines)
