"""`fxctl bench`: benchmarks. `tier` measures the KV tier; other subcommands join this group."""

from __future__ import annotations

import click

from fxctl.output import dumps, emit


@click.group(name="bench")
def command():
    """Benchmarks: the KV tier (tier); the serving load generator joins later."""


def _parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = text.strip().lower().rstrip("ib")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


@command.command(name="tier")
@click.option("--dir", "directory", default="/work/tmp-bench/tier", show_default=True,
              help="Scratch directory on the filesystem under test (deleted afterwards unless --keep).")
@click.option("--size", "sizes", multiple=True, type=click.Choice(["32m", "4m"]), default=("32m", "4m"),
              show_default=True, help="Chunk shapes: 32m = Llama-3.1-8B bf16 TP1, 4m = Qwen3-Coder-480B FP8 TP8.")
@click.option("--total", default="4G", show_default=True, help="Bytes of KV per chunk size (more than L1).")
@click.option("--l1", "l1", default="1G", show_default=True, help="L1 DRAM budget.")
@click.option("--batch", default="512M", show_default=True, help="Bytes restored per get_into call.")
@click.option("--io-threads", default=16, show_default=True, type=int,
              help="Most parallel reads (fxctl) and LMCache disk_io_threads.")
@click.option("--passes", default=3, show_default=True, type=int, help="Cold restore passes (best reported).")
@click.option("--recovery-chunks", default=100_000, show_default=True, type=int)
@click.option("--no-lmcache", is_flag=True, help="Skip LMCache's LocalDiskBackend.")
@click.option("--keep", is_flag=True, help="Keep the scratch directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.pass_obj
def tier(app, directory, sizes, total, l1, batch, io_threads, passes, recovery_chunks, no_lmcache, keep, as_json):
    """Cold L2 restore vs fio and vs LMCache's disk tier, restart, recovery, L1 hits, put.

    Needs root for dropping the page cache and reserving huge pages for fio; prints ratios
    measured side by side in one run.
    """
    from fxctl.bench.tier import TierBenchSpec, run

    spec = TierBenchSpec(directory=directory, sizes=tuple(sizes), total_bytes=_parse_size(total),
                         l1_bytes=_parse_size(l1), batch_bytes=_parse_size(batch), io_threads=io_threads,
                         passes=passes, recovery_chunks=recovery_chunks, lmcache=not no_lmcache, keep=keep)
    result = run(spec)
    if as_json:
        click.echo(dumps(result, "json"))
        return
    rows = [(r["measure"], "-" if r["value"] is None else f"{r['value']:.3g}",
             "-" if r["goal"] is None else f">= {r['goal']:g}",
             {True: "yes", False: "NO", None: "-"}[r["met"]], r["detail"]) for r in result["ratios"]]
    emit(result, app.output_format if app else "table", rows=rows,
         headers=["measure", "ratio", "goal", "met", "detail"])
