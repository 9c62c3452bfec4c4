"""bench serve behind a router: with --replica, the reset endpoints and /metrics go to every replica (a router
passes them to one) and the replicas' counters are summed. Two emulators stand for the replicas."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from fxctl.loadgen.generator import Client, LoadSpec, run
from fxctl.loadgen.workloads import WorkloadSpec
from fxctl.tune.server import ServerProcess, sim_argv

QUERIES = "vllm:prefix_cache_queries_total"


@pytest.fixture(scope="module")
def replicas():
    with ServerProcess(sim_argv("lab", 0.01)) as a, ServerProcess(sim_argv("lab", 0.01)) as b:
        yield a.url, b.url


def scrape(base: str, servers: tuple[str, ...]) -> dict:
    async def go():
        async with aiohttp.ClientSession() as session:
            return await Client(session, base, 1.0, servers).scrape()
    return asyncio.run(go())


def hbm_queries(counters: dict) -> float:
    return sum(v for k, v in counters.items() if k.startswith(QUERIES))


def test_counters_of_every_replica_are_summed_and_resets_reach_each(replicas):
    a, b = replicas
    warm = WorkloadSpec("long-context", 512, 512, output_tokens=4)
    run(LoadSpec(b, warm, concurrency=1, requests=2, time_scale=0.01))       # only b has served anything
    only_a, only_b = hbm_queries(scrape(a, ())), hbm_queries(scrape(b, ()))
    assert only_b > 0 and hbm_queries(scrape(a, (a, b))) == only_a + only_b
    result = run(LoadSpec(a, WorkloadSpec("cold-recovery", 1024, 1024, output_tokens=4), concurrency=2, requests=4,
                          time_scale=0.01, clock="model", reset_caches=True, replicas=(a, b)))
    assert result["phases"]["reset"] == {"reset_prefix_cache": 200, "reset_tiers": 200}
    assert result["phases"]["evict"] == {"reset_prefix_cache": 200, "reset_tiers_l1": 200}
    assert result["completed"] == 4 and result["tier_hits"]["hbm"]["query_tokens"] == 4 * 1024   # b: no change
