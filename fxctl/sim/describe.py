"""A profile described: every parameter with its source, and the figures the cost model derives from them
(`fxctl sim profile`). Apart from profile.py so that loading a profile needs neither the cost model nor the
tiers (they import the profile; nothing imports back)."""

from __future__ import annotations

from typing import Any

from fxctl.sim.connector import tier_rates
from fxctl.sim.cost import hbm_kv_blocks, kv_bytes_per_token
from fxctl.sim.profile import Profile


def describe_profile(profile: Profile) -> dict:
    """Parameters with sources, plus the figures the cost model derives from them."""
    params = [{"parameter": f"{s}.{k}", "value": p.value, "source": p.source or "-"}
              for s, section in profile.sections.items() for k, p in section.items()]
    derived: dict[str, Any] = {"cost_model": profile.cost_model, "hbm_kv_blocks": hbm_kv_blocks(profile),
                               "block_size": profile.get("serving", "block_size", 16)}
    if profile.cost_model != "fixed":
        rates = tier_rates(profile)
        derived.update({
            "kv_bytes_per_token": kv_bytes_per_token(profile),
            "hbm_kv_tokens": hbm_kv_blocks(profile) * profile.get("serving", "block_size", 16),
            "l1_chunks": rates.l1_chunks, "l2_chunks": rates.l2_chunks,
            "l2_read_gbs": round(rates.l2_bps / 1e9, 2),
            "l2_read_gbs_stock_lmcache": round(tier_rates(profile, "lmcache-disk").l2_bps / 1e9, 2),
            "l2_per_request_gbs": round(rates.l2_request_bps / 1e9, 2)})
    return {"profile": profile.name, "path": str(profile.path), "description": profile.description,
            "emulator": "simulated GPU timing", "parameters": params, "derived": derived}
