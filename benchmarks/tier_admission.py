"""L2 write admission (issue 15.4): bytes written to L2 per byte stored, and hit rates, per policy, replaying the
multi-turn and cold-recovery workloads (fxctl/loadgen/workloads.py) at the level of KV chunks against TierStore.

    .venv/bin/python -m benchmarks.tier_admission [--dir /mnt/kv/adm] [--json out.json]

The replay does what a connector does per request: look up the prompt's chunks as a prefix (`contains`),
read the ones found (`get_into`: L1, else L2), put the rest (computed). A chunk's key is its position in its
session's or prompt's token stream, so turn t+1 of a session finds turn t's chunks (the whole history is
resent, as the load generator's chat bodies do). After every request the write-behind is flushed, so the
counts do not depend on timing: the figures are deterministic for a given seed (no repeats needed).

- multi-turn: sessions of `--turns` turns (user messages and replies of the workload's sizes), `--concurrency`
  sessions interleaved turn by turn; L1 holds `--l1-share` of the chunks the run stores.
- cold-recovery: every prompt once (fill), then a restart (a new store over the same L2 directory, L1 empty,
  nothing written back: a crash or a kill), then every prompt again: the share of chunks found after the
  restart is what a restarted server reuses instead of recomputing.

Chunks are `--chunk-kib` KiB (smaller than a real model's: bytes scale the I/O, not the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from fxctl.kvtier import TierConfig, TierStore
from fxctl.kvtier.admission import ADMISSION_POLICIES
from fxctl.kvtier.buffers import aligned_buffer
from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.loadgen.workloads import WorkloadSpec, chat_sessions, lengths
from fxctl.paths import scratch_dir


def multi_turn_requests(sessions: int, turns: int, concurrency: int, seed: int) -> list[tuple[str, int]]:
    """(stream, chunks in the prompt) per request, in arrival order: `concurrency` sessions at a time,
    turn by turn; a prompt is the session's history (user messages and replies) plus the new message."""
    spec = WorkloadSpec("multi-turn", min_tokens=512, max_tokens=3072, turns=turns, output_tokens=256)
    out = []
    chats = chat_sessions(spec, sessions, nonce=seed)
    for start in range(0, sessions, concurrency):
        group = chats[start:start + concurrency]
        history = [0] * len(group)
        for turn in range(turns):
            for i, chat in enumerate(group):
                prompt = history[i] + chat.user_tokens[turn]
                out.append((chat.salt, prompt // CHUNK_TOKENS))
                history[i] = prompt + spec.output_tokens
    return out


def cold_recovery_prompts(prompts: int, seed: int) -> list[tuple[str, int]]:
    spec = WorkloadSpec("cold-recovery", min_tokens=2048, max_tokens=8192)
    return [(f"p{seed}-{i}", n // CHUNK_TOKENS) for i, n in enumerate(lengths(prompts, spec.min_tokens,
                                                                              spec.max_tokens))]


class Replay:
    """Serve requests against one store; counts chunks looked up, found (per tier) and computed."""

    def __init__(self, store: TierStore, chunk_bytes: int):
        self.store, self.chunk_bytes = store, chunk_bytes
        self.src = aligned_buffer(chunk_bytes)
        self.dest = aligned_buffer(chunk_bytes)
        self.wanted = self.found = self.computed = 0

    def request(self, stream: str, chunks: int) -> None:
        keys = [f"{stream}/{i}" for i in range(chunks)]
        found = 0
        for key in keys[:self.store.contains(keys)]:
            if self.store.get_into([key], [self.dest])[0] is None:
                break  # a miss after all (a failed read): the rest is recomputed
            found += 1
        self.wanted += chunks
        self.found += found
        for i in range(found, chunks):
            if not self.store.contains([keys[i]]):  # what a connector stores: the chunks the tier lacks
                self.src[:8] = i.to_bytes(8, "little")
                self.store.put(keys[i], self.src)
                self.computed += 1
        self.store.flush()


def tier_counts(store: TierStore) -> dict:
    c = store.stats()["counters"]
    return {k: c.get(k, 0) for k in ("put_bytes", "l2_bytes_written", "l1_hits", "l2_hits", "l1_misses",
                                     "l2_misses", "l2_admissions_refused", "l1_evictions", "l1_demotions")}


def run_policy(workload: str, policy: str, l1_share: float, directory: str, args) -> dict:
    shutil.rmtree(directory, ignore_errors=True)
    chunk_bytes = args.chunk_kib * 1024
    if workload == "multi-turn":
        requests = multi_turn_requests(args.sessions, args.turns, args.concurrency, args.seed)
    else:
        requests = cold_recovery_prompts(args.prompts, args.seed)
    longest: dict[str, int] = {}
    for stream, chunks in requests:
        longest[stream] = max(chunks, longest.get(stream, 0))
    distinct = sum(longest.values())  # the chunks the run stores
    cfg = TierConfig(l2_path=directory, l1_bytes=max(1, int(l1_share * distinct)) * chunk_bytes,
                     l2_bytes=4 << 30, segment_bytes=256 << 20, durable=False, l2_admission=policy,
                     max_pending_bytes=256 << 20)
    store = TierStore(cfg)
    replay = Replay(store, chunk_bytes)
    for stream, chunks in requests:
        replay.request(stream, chunks)
    counts = tier_counts(store)
    row = {"workload": workload, "policy": policy, "requests": len(requests), "chunk_bytes": chunk_bytes,
           "distinct_chunks": distinct, "l1_share": l1_share, "l1_bytes": cfg.l1_bytes, "chunks_wanted": replay.wanted,
           "chunks_found": replay.found, **counts}
    if workload == "cold-recovery":
        store.close()  # the restart: L1 is gone, L2 is reopened from its journal
        store = TierStore(cfg)
        after = Replay(store, chunk_bytes)
        for stream, chunks in requests:
            after.request(stream, chunks)
        row["after_restart"] = {"chunks_wanted": after.wanted, "chunks_found": after.found,
                                **{k: v for k, v in tier_counts(store).items() if k in ("l1_hits", "l2_hits")}}
        row["l2_bytes_written_fill"] = counts["l2_bytes_written"]
    store.close()
    shutil.rmtree(directory, ignore_errors=True)
    row["write_amplification"] = row["l2_bytes_written"] / (row["put_bytes"] or 1)
    wanted = replay.wanted or 1
    row["from_l1"], row["from_l2"] = row["l1_hits"] / wanted, row["l2_hits"] / wanted
    row["recomputed"] = 1 - replay.found / wanted
    if "after_restart" in row:
        a = row["after_restart"]
        row["found_after_restart"] = a["chunks_found"] / a["chunks_wanted"] if a["chunks_wanted"] else None
    return row


def table(rows: list[dict]) -> str:
    out = ["| workload | L1 (share of chunks) | policy | L2 bytes written / bytes put | chunks served from L1 | "
           "from L2 | recomputed | refused (chunks lost to L2) | found after restart |",
           "|---|---|---|---|---|---|---|---|---|"]
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    for r in rows:
        out.append(f"| {r['workload']} | {r['l1_share']:.2f} | {r['policy']} | {r['write_amplification']:.2f} | "
                   f"{pct(r['from_l1'])} | {pct(r['from_l2'])} | {pct(r['recomputed'])} | "
                   f"{r['l2_admissions_refused']} | {pct(r.get('found_after_restart'))} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default=None, help="where to put the L2 (a new fxctl-admission-* folder inside it, "
                   "removed after; default /var/tmp)")
    p.add_argument("--chunk-kib", type=int, default=256)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--prompts", type=int, default=200)
    p.add_argument("--l1-share", type=float, action="append",
                   help="L1 budget as a share of the chunks the run stores (repeatable; default 0.1, 0.25, 0.5)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    # a new directory inside --dir (or /var/tmp), removed after: nothing else there is touched
    with scratch_dir(args.dir or "/var/tmp", prefix="fxctl-admission-") as base:
        for workload in ("multi-turn", "cold-recovery"):
            for share in args.l1_share or [0.1, 0.25, 0.5]:
                for policy in ADMISSION_POLICIES:
                    rows.append(run_policy(workload, policy, share, os.path.join(base, "l2"), args))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
