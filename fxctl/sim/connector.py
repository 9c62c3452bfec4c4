"""L1 and L2 together, as LMCache's connector sees them: look a prompt's chunks up, read, store, reset.

Bandwidths come from the profile: L1 at the DRAM pool's rate; L2 at the bottleneck of the SSD array and
the NVMe-oF links (min(SSDs x read rate, links x rate x protocol efficiency)) times the backend's read efficiency,
with each request's own reads capped at a per-request rate. The backend is fxctl's tier or, for the R2
baseline, LMCache's stock disk backend (lower read efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass

from fxctl.kvtier.config import CHUNK_TOKENS
from fxctl.sim.cost import kv_bytes_per_token
from fxctl.sim.profile import Profile
from fxctl.sim.request import SimRequest
from fxctl.sim.stats import EngineStats
from fxctl.sim.tier_model import L2Store, ModelledTier, SharedLink, Transfer
from fxctl.units import GB


@dataclass(frozen=True)
class TierRates:
    chunk_bytes: float
    l1_chunks: int
    l1_bps: float
    l2_chunks: int
    l2_bps: float
    l2_request_bps: float
    l2_backend: str
    array_bps: float = 0.0           # SSDs x read rate x the backend's read efficiency
    link_bps: float = 0.0            # links x rate x protocol efficiency (l2_bps is the smaller of the two)
    ssds: int = 1
    links: int = 1


def tier_rates(profile: Profile, backend: str | None = None) -> TierRates:
    t = lambda key, default=0: profile.get("tiers", key, default)  # noqa: E731
    chunk_bytes = t("chunk_tokens", CHUNK_TOKENS) * kv_bytes_per_token(profile)
    backend = backend or t("l2_backend", "fxctl")
    stock = backend == "lmcache-disk"
    efficiency = t("stock_l2_read_efficiency", 1) if stock else t("l2_read_efficiency", 1)
    link_efficiency = t("stock_l2_link_efficiency", 1) if stock else t("l2_link_efficiency", 1)
    array_bps = t("l2_ssd_count", 1) * t("l2_ssd_read_gbs", 1) * GB * efficiency
    link_bps = t("l2_links", 1) * t("l2_link_gbits", 100) / 8 * GB * link_efficiency
    request_bps = t("l2_request_read_gbs", 0) * GB or array_bps
    return TierRates(
        chunk_bytes=chunk_bytes,
        l1_chunks=int(t("l1_size_gb") * GB // chunk_bytes),
        l1_bps=t("l1_bandwidth_gbs", 25) * GB,
        l2_chunks=int(t("l2_size_gb") * GB // chunk_bytes),
        l2_bps=min(array_bps, link_bps),
        l2_request_bps=request_bps * efficiency,
        l2_backend=backend,
        array_bps=array_bps, link_bps=link_bps, ssds=int(t("l2_ssd_count", 1)), links=int(t("l2_links", 1)),
    )


class TierSet:
    def __init__(self, rates: TierRates, chunk_tokens: int, l2: L2Store | None = None):
        self.rates = rates
        self.chunk_tokens = chunk_tokens
        self.l1 = ModelledTier("l1", rates.l1_chunks, rates.chunk_bytes, SharedLink(rates.l1_bps))
        self.l2 = l2 or ModelledTier("l2", rates.l2_chunks, rates.chunk_bytes,
                                     SharedLink(rates.l2_bps, rates.l2_request_bps))

    def by_name(self, name: str):
        return self.l1 if name == "l1" else self.l2

    def lookup(self, req: SimRequest, stats: EngineStats) -> list[tuple[str, int, int]]:
        """(tier, first token, tokens) to read: the full chunks after the HBM hit, L1 first, then L2."""
        chunk = self.chunk_tokens
        first_chunk = req.computed // chunk
        last_useful = (req.prefill_target - 1) // chunk  # leave a token to compute
        keys = req.chunk_keys[first_chunk:last_useful]
        if not keys:
            return []
        l1_hits = self.l1.prefix_hits(keys)
        l2_hits = self.l2.prefix_hits(keys[l1_hits:]) if l1_hits < len(keys) else 0
        stats.tier_hits["l1"] += l1_hits
        stats.tier_misses["l1"] += len(keys) - l1_hits
        if l1_hits < len(keys):
            stats.tier_hits["l2"] += l2_hits
            stats.tier_misses["l2"] += len(keys) - l1_hits - l2_hits
        loads = []
        start = req.computed
        l1_end = (first_chunk + l1_hits) * chunk
        if l1_hits:
            loads.append(("l1", start, l1_end - start))
            start = l1_end
        if l2_hits:
            loads.append(("l2", start, (first_chunk + l1_hits + l2_hits) * chunk - start))
        return loads

    def start_read(self, tier: str, req: SimRequest, first_token: int, tokens: int, now: float,
                   stats: EngineStats) -> Transfer:
        chunk = self.chunk_tokens
        keys = req.chunk_keys[first_token // chunk:(first_token + tokens) // chunk]
        nbytes = tokens * self.rates.chunk_bytes / chunk
        stats.tier_read_bytes[tier] += nbytes
        if tier == "l2":
            self.l1.add(keys)  # promoted on a hit: the next reuse is served from DRAM
            return self.l2.start_read(keys, now)
        return self.l1.link.start(nbytes, now)

    def store(self, req: SimRequest, stats: EngineStats) -> None:
        """Offload the prompt's full chunks: into L1, and written behind to L2 unless already there."""
        keys = req.chunk_keys
        self.l1.add(keys)
        stats.tier_stored_chunks["l1"] += len(keys)
        new = keys[self.l2.prefix_hits(keys):]
        self.l2.add(new)
        stats.tier_stored_chunks["l2"] += len(new)

    def advance(self, now: float) -> list[tuple[str, Transfer]]:
        done = [("l1", t) for t in self.l1.link.advance(now)]
        done += [("l2", t) for t in self.l2.link.advance(now)]
        return done

    def next_completion(self) -> float | None:
        times = [t for t in (self.l1.link.next_completion(), self.l2.link.next_completion()) if t is not None]
        return min(times) if times else None

    def clear(self, tiers: tuple[str, ...]) -> dict[str, int]:
        return {name: self.by_name(name).clear() for name in tiers}

    def chunk_counts(self) -> dict[str, int]:
        return {"l1": self.l1.chunk_count(), "l2": self.l2.chunk_count()}


def build_tiers(profile: Profile, backend: str | None = None, l2: L2Store | None = None) -> TierSet:
    return TierSet(tier_rates(profile, backend), int(profile.get("tiers", "chunk_tokens", CHUNK_TOKENS)), l2)
