"""`fxctl serve top`'s screen (rich): a table of instances refreshed in place, like top."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from fxctl.serve.roles import Role
from fxctl.units import GB

ROLE = {Role.ENGINE: "engine", Role.LMCACHE_SERVER: "tier", Role.ROUTER: "router"}


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def rate_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GB/s", GB), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B/s"


def table(rows: list[dict], *, title: str, errors: dict[str, str]) -> Table:
    t = Table(title=title, title_justify="left", expand=False, pad_edge=False)
    for header, justify in (("host", "left"), ("instance", "left"), ("role", "left"), ("req/s", "right"),
                            ("run", "right"), ("TTFT p50", "right"), ("prefix hit", "right"),
                            ("connector hit", "right"), ("L1 hits", "right"), ("L2 hits", "right"),
                            ("L2 read", "right"), ("L2 write", "right"), ("L2 fill", "right"), ("errors", "right")):
        t.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        if not row["up"]:
            t.add_row(row["host"], row["instance"], ROLE.get(row["role"], row["role"]),
                      Text("not answering", style="bold red"), *[""] * 10)
            continue
        tier = row.get("tier") or {}
        l1, l2 = tier.get("l1") or {}, tier.get("l2") or {}
        hits = lambda t: "-" if not t else f"{t['hits']:.0f}/{t['hits'] + t['misses']:.0f}"  # noqa: E731
        fill = l2.get("usage_bytes") / l2["max_capacity_bytes"] if l2.get("max_capacity_bytes") else None
        errors_n = sum(t.get("errors", 0) for t in tier.values())
        t.add_row(row["host"], row["instance"], ROLE.get(row["role"], row["role"]),
                  num(row.get("requests_per_s"), "{:.2f}"), num(row.get("running"), "{:.0f}"),
                  num(row.get("ttft_p50_s"), "{:.3f}s"), pct(row.get("prefix_hit_rate")),
                  pct(row.get("external_hit_rate")), hits(l1), hits(l2),
                  rate_bytes(l2.get("read_bytes_per_s")) if l2 else "-",
                  rate_bytes(l2.get("write_bytes_per_s")) if l2 else "-", pct(fill) if l2 else "-",
                  Text(f"{errors_n:.0f}", style="bold red") if errors_n else ("0" if tier else "-"))
    for host, error in sorted(errors.items()):
        t.add_row(host, Text(error[:80], style="red"), *[""] * 12)
    if not rows and not errors:
        t.add_row("-", "no serving instances recorded", *[""] * 12)
    return t
