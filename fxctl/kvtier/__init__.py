"""The KV tier: L1 DRAM pool + L2 paged store on disk, over opaque chunks; knows nothing of LMCache.

    from fxctl.kvtier import TierConfig, TierStore
    with TierStore(TierConfig(l2_path="/mnt/kv", l1_bytes=8 << 30, l2_bytes=1 << 40)) as store:
        store.put("key", data)               # write-behind to L2
        store.contains(["k0", "k1", "k2"])   # how many leading keys are stored
        store.get_into(["key"], [out])       # into the caller's buffers, L2 reads in parallel
"""

from fxctl.kvtier.config import PAGE_BYTES, TierConfig
from fxctl.kvtier.store import TierStore

__all__ = ["PAGE_BYTES", "TierConfig", "TierStore"]
