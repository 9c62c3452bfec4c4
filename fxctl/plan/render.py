"""The plan for people: one table of figures (what, value, from what) and a few lines of verdict."""

from __future__ import annotations

from pathlib import Path

from fxctl.plan.planner import Plan


def gb(value: float) -> str:
    return f"{value:,.1f} GB" if value < 10_000 else f"{value / 1000:,.1f} TB"


def render_plan(plan: Plan, banner: str, written: Path | None) -> dict:
    kv, h, t, b, a = plan.kv, plan.hbm, plan.tiers, plan.bandwidth, plan.ask
    rows = [
        ("KV", "bytes per token, per GPU", f"{kv.per_gpu_bytes:,} B",
         f"{kv.layers_per_rank} layers x "
         + (f"latent {kv.head_size}" if kv.mla else f"2 x {kv.heads_per_rank} heads x {kv.head_size}")
         + f" x {kv.dtype_bytes} B ({kv.kv_cache_dtype}; TP {kv.tensor_parallel}, PP {kv.pipeline_parallel})"),
        ("KV", "bytes per token, stored in a tier", f"{kv.stored_bytes:,} B",
         "MLA latent once" if kv.mla else "every KV head once"),
        ("HBM", "per GPU: usable / weights / activations",
         f"{h.usable_gb:.1f} / {h.weights_gb:.1f} / {h.activation_gb:.1f} GB",
         f"{h.hbm_gb:g} GB x gpu_memory_utilization"),
        ("HBM", "KV pool per GPU", gb(h.kv_space_gb), f"{h.kv_tokens:,} tokens of KV for the instance"),
        ("HBM", "largest max_model_len / concurrency at context", f"{h.max_model_len:,} / {h.max_concurrency}",
         f"context {a.context:,} tokens"),
        ("HBM", f"{a.concurrency} x {a.context:,} tokens", "fits" if h.fits else "DOES NOT FIT",
         f"{h.needed_gb:.1f} GB per GPU"),
        ("L1", "DRAM pool", gb(t.l1_gb), f"{t.l1_contexts} contexts of {gb(t.context_gb)}"),
        ("L2", "SSD tier", gb(t.l2_gb), f"reuse window of {t.l2_contexts} contexts"),
        ("L2", "cold burst", gb(b.burst_gb), f"{a.concurrency} contexts restored at once"),
        ("L2", "array / link read rate", f"{b.array_gbs:.1f} / {b.link_gbs:.1f} GB/s",
         "as given (efficiencies applied)"),
    ]
    if b.needed_gbs is not None:
        rows += [("L2", "read rate the TTFT target needs", f"{b.needed_gbs:.1f} GB/s",
                  f"burst / {b.ttft_target_s:g} s; one request {b.per_request_gbs:.2f} GB/s "
                  f"(cap {b.request_cap_gbs:.2f})"),
                 ("L2", "SSDs / links for that rate (arithmetic)", f"{b.ssds_needed} / {b.links_needed}",
                  "lower bound; the emulator checks it below")]
    for p in plan.predictions:
        rows.append(("predicted", f"{p.case}: TTFT p50 / p90", f"{p.ttft_p50_s:.2f} / {p.ttft_p90_s:.2f} s",
                     f"{p.output_tps:.1f} output tok/s, {p.requests} requests (emulated)"))
    cold = plan.prediction("cold")
    if cold and cold.l2_write_gbs:
        rows.append(("L2", "write-behind rate if every context is new", f"{cold.l2_write_gbs:.2f} GB/s",
                     "at the cold rate"))
    rec = plan.recommended
    if rec and rec.get("met_by"):
        rows.append(("sizing", "SSDs / links that meet the SLO", f"{rec['ssds']} / {rec['links']}", rec["met_by"]))
    elif rec:
        rows.append(("sizing", "SSDs / links that meet the SLO", "none found", f"tried {len(rec['tried'])}"))
    if plan.r2:
        rows.append(("check", "R2 cold-recovery TTFT p50", f"{plan.r2['predicted_ttft_p50_s']:.2f} s",
                     f"report {plan.r2['report_ttft_p50_s']} s, ratio {plan.r2['ratio']}"))
    lines = ["", f"HBM: {h.explanation}."]
    lines += [f"note: {n}" for n in t.notes + b.notes + plan.notes]
    if plan.slo:
        verdict = {True: "meets", False: "does NOT meet", None: "cannot be judged for"}[plan.meets]
        lines.append(f"The given hardware {verdict} the SLO {', '.join(map(str, plan.slo))} in cold recovery.")
    if written:
        lines.append(f"wrote the planned profile: {written}")
    lines.append(f"{banner} ({plan.wall_s:.1f} s)")
    return {"rows": rows, "headers": ["", "figure", "value", "from"], "text": "\n".join(lines)}


def render_sweep(result: dict, banner: str) -> dict:
    param = result["param"]
    rows = [(r[param], "yes" if r["fits"] else "no", r.get("ttft_p50_s", "-"), r.get("ttft_p90_s", "-"),
             r.get("output_tps", "-"), {True: "yes", False: "no", None: "-"}[r.get("meets_slo")])
            for r in result["points"]]
    lines = [f"\ncase: {result['case']}" + (f"; SLO {', '.join(result['slo'])}" if result["slo"] else "")]
    if result["slo"]:
        lines.append(f"first point that meets it: {result['first_meeting']}" if result["first_meeting"] is not None
                     else "no point meets it")
    lines.append(f"plot: {result['plot']}" if result["plot"] else result["plot_note"])
    lines.append(banner)
    return {"rows": rows, "headers": [param, "fits", "TTFT p50 s", "TTFT p90 s", "tok/s", "meets SLO"],
            "text": "\n".join(lines)}
