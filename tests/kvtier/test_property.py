"""Property: any sequence of put / get / contains / remove / flush / restart behaves like a dict."""

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import TierStore
from fxctl.kvtier.config import padded

KEYS = st.sampled_from([f"k{i}" for i in range(8)])
SIZES = st.sampled_from([1, 100, 4096, 5000, 65_536, 65_537, 200_000])


class TierStoreVsDict(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="kvtier-prop-", dir="/var/tmp")
        # L1 holds about two chunks: most gets go to L2; L2 never needs to evict (8 keys x 256 KiB)
        self.cfg = small_config(self.directory, l1_bytes=512 << 10, l2_bytes=16 << 20, segment_bytes=4 << 20,
                                checkpoint_records=7)
        self.store = TierStore(self.cfg)
        self.model: dict[str, bytes] = {}

    @rule(key=KEYS, size=SIZES, seed=st.integers(0, 3))
    def put(self, key, size, seed):
        data = chunk_bytes(key, size, seed)
        assert self.store.put(key, data)
        self.model[key] = data

    @rule(key=KEYS)
    def get(self, key):
        out = bytearray(200_000)
        n = self.store.get_into([key], [out])[0]
        if key in self.model:
            assert n == len(self.model[key]) and bytes(out[:n]) == self.model[key]
        else:
            assert n is None

    @rule(keys=st.lists(KEYS, max_size=5))
    def contains(self, keys):
        expected = 0
        for k in keys:
            if k not in self.model:
                break
            expected += 1
        assert self.store.contains(keys) == expected

    @rule(key=KEYS)
    def remove(self, key):
        assert self.store.remove(key) == (key in self.model)
        self.model.pop(key, None)

    @rule()
    def flush(self):
        assert self.store.flush(timeout=30)

    @rule()
    def restart(self):
        self.store.close()
        self.store = TierStore(self.cfg)
        l2 = self.store.stats()["l2"]
        assert l2["chunks"] == len(self.model)
        assert l2["used_bytes"] == sum(padded(len(v)) for v in self.model.values())

    @invariant()
    def nothing_lost_or_leaked(self):
        stats = self.store.stats()
        counters = stats["counters"]
        assert counters.get("l2_checksum_failures", 0) == 0 and counters.get("l2_skipped_writes", 0) == 0

    def teardown(self):
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)


TierStoreVsDict.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
test_tier_store_behaves_like_a_dict = TierStoreVsDict.TestCase
