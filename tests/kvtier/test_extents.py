"""ExtentAllocator: first fit, coalescing, reservation at recovery, and refusal of double frees."""

import random

import pytest

from fxctl.kvtier.extents import ExtentAllocator


def test_allocate_until_full_then_none():
    alloc = ExtentAllocator(10)
    assert [alloc.allocate(3), alloc.allocate(3), alloc.allocate(3)] == [0, 3, 6]
    assert alloc.allocate(2) is None
    assert alloc.allocate(1) == 9
    assert alloc.free_pages == 0


def test_free_coalesces_neighbours():
    alloc = ExtentAllocator(9)
    a, b, c = alloc.allocate(3), alloc.allocate(3), alloc.allocate(3)
    alloc.free(a, 3)
    alloc.free(c, 3)
    assert alloc.extents() == [(0, 3), (6, 3)]
    alloc.free(b, 3)
    assert alloc.extents() == [(0, 9)]
    assert alloc.largest_free() == 9


def test_reserve_splits_a_free_extent_and_refuses_overlap():
    alloc = ExtentAllocator(16)
    assert alloc.reserve(4, 4)
    assert alloc.extents() == [(0, 4), (8, 8)]
    assert not alloc.reserve(6, 4)
    assert not alloc.reserve(14, 4)  # past the end
    assert alloc.free_pages == 12


def test_double_free_is_refused():
    alloc = ExtentAllocator(8)
    start = alloc.allocate(4)
    alloc.free(start, 4)
    with pytest.raises(ValueError):
        alloc.free(start, 4)
    with pytest.raises(ValueError):
        alloc.free(2, 2)


def test_random_allocations_never_overlap_and_free_space_adds_up():
    rnd = random.Random(7)
    alloc = ExtentAllocator(256)
    live: dict[int, int] = {}
    for _ in range(2000):
        if live and rnd.random() < 0.45:
            start = rnd.choice(list(live))
            alloc.free(start, live.pop(start))
        else:
            n = rnd.randint(1, 12)
            start = alloc.allocate(n)
            if start is not None:
                live[start] = n
        used = sorted((s, s + n) for s, n in live.items())
        assert all(a[1] <= b[0] for a, b in zip(used, used[1:]))
        assert alloc.free_pages == 256 - sum(live.values())
        assert sum(n for _s, n in alloc.extents()) == alloc.free_pages
