"""Tier building blocks: the shared link's processor sharing with a per-request cap, the chunk index, HBM blocks."""

import pytest

from fxctl.sim.blocks import BlockPool
from fxctl.sim.tier_model import ChunkIndex, SharedLink


def run_until_done(link: SharedLink) -> dict[int, float]:
    done = {}
    while link.active:
        t = link.next_completion()
        for transfer in link.advance(t):
            done[transfer.id] = t
    return done


def test_one_transfer_runs_at_the_per_request_cap():
    link = SharedLink(total_bps=10e9, stream_bps=2e9)
    t = link.start(4e9, now=0.0)
    assert run_until_done(link) == {t.id: pytest.approx(2.0)}


def test_many_transfers_share_the_link_once_the_cap_no_longer_binds():
    link = SharedLink(total_bps=10e9, stream_bps=2e9)
    ids = [link.start(4e9, now=0.0).id for _ in range(10)]  # 10 x 2 GB/s > 10 GB/s: link-bound
    done = run_until_done(link)
    assert [done[i] for i in ids] == [pytest.approx(4.0)] * 10


def test_a_late_transfer_speeds_up_when_others_finish():
    link = SharedLink(total_bps=4e9, stream_bps=4e9)
    first = link.start(4e9, now=0.0)   # alone: 4 GB/s
    second = link.start(4e9, now=0.5)  # from 0.5 s both at 2 GB/s
    done = run_until_done(link)
    assert done[first.id] == pytest.approx(0.5 + 2e9 / 2e9)   # 2 GB left at 2 GB/s
    assert done[second.id] == pytest.approx(1.5 + 2e9 / 4e9)  # 2 GB left alone at 4 GB/s


def test_fixed_duration_transfers_complete_on_time():
    link = SharedLink(total_bps=1.0)
    t = link.start(1e12, now=3.0, duration=0.25)
    assert link.next_completion() == pytest.approx(3.25)
    assert [x.id for x in link.advance(3.25)] == [t.id]


def test_chunk_index_is_a_bounded_lru_with_prefix_lookups():
    index = ChunkIndex(capacity_chunks=3)
    index.add([b"a", b"b", b"c"])
    assert index.prefix_hits([b"a", b"x", b"b"]) == 1
    index.add([b"d"])  # evicts the least recently used: b
    assert index.prefix_hits([b"a", b"b"]) == 1 and index.evictions == 1


def test_block_pool_keeps_freed_hashes_until_reuse_and_evicts_oldest_first():
    pool = BlockPool(4)
    first = pool.acquire([], 2)
    pool.register(first, [b"h0", b"h1"])
    pool.release(first)
    assert pool.num_free == 4 and pool.match_prefix([b"h0", b"h1"]) == first
    again = pool.acquire(pool.match_prefix([b"h0"]), 1)  # reuse h0, take a never-used block
    assert again[0] == first[0] and pool.num_free == 2
    pool.acquire([], 2)  # takes the other never-used block, then evicts h1's block
    assert pool.match_prefix([b"h0", b"h1"]) == [first[0]]
    assert pool.acquire([], 1) is None
    assert pool.reset_prefix_cache() == 1 and pool.match_prefix([b"h0"]) == []
