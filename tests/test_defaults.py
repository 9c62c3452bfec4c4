"""One name and one default for the KV chunk size in tokens and for the tier's read threads (issue 16 #4):
fxctl.kvtier.config's CHUNK_TOKENS and IO_THREADS, used by the tier, the emulator and the benchmarks."""

from __future__ import annotations

import re
from pathlib import Path

from fxctl.kvtier.config import CHUNK_TOKENS, IO_THREADS, TierConfig
from fxctl.sim.engine import Engine
from fxctl.sim.profile import load_profile
from fxctl.tierbench.bench import TierBenchSpec
from fxctl.tierbench.chunks import ChunkShape

PACKAGE = Path(__file__).resolve().parent.parent / "fxctl"
# modules other sessions are changing now, with their own copies of the defaults: to use kvtier.config's
PENDING: set[str] = set()


def test_the_defaults_are_declared_once():
    assert (TierConfig().io_threads,) == TierBenchSpec().io_threads == (IO_THREADS,)
    assert ChunkShape("x", 1, 1, 1, 2, "bfloat16").tokens == CHUNK_TOKENS
    profile = load_profile("lab")
    assert Engine(profile).chunk_tokens == profile.get("tiers", "chunk_tokens", CHUNK_TOKENS)


def test_no_other_module_spells_them_out():
    copies = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
              if re.search(r'chunk_(tokens|size)"?,? *(: *int *)?=? *256\b|io_threads: int = \d', p.read_text())}
    assert copies - PENDING - {"kvtier/config.py"} == set(), sorted(copies)
