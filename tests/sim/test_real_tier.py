"""`--real-tier`: L2 goes through the real fxctl.kvtier store on a directory; read time is measured."""

import pytest

from fxctl.sim.connector import build_tiers
from fxctl.sim.engine import Engine
from fxctl.sim.profile import load_profile
from fxctl.sim.request import SimRequest

from .support import sim_server, value

pytest.importorskip("fxctl.kvtier")


def serve(engine, req):
    req.arrival = engine.now
    engine.add_request(req)
    for _ in range(10_000):
        if not engine.has_work():
            return req
        engine.step()
    raise AssertionError("did not finish")


def test_cold_prefix_is_read_back_from_the_real_store_and_timed(tmp_path):
    from fxctl.sim.real_l2 import open_real_l2

    profile = load_profile("lab")
    real = open_real_l2(profile, tmp_path / "l2", scale=8)
    try:
        engine = Engine(profile, tiers=build_tiers(profile, l2=real))
        prompt = list(range(7000, 7000 + 4096))
        serve(engine, SimRequest("fill", prompt, 2))
        real.store.flush()
        assert real.chunk_count() == 16
        engine.reset_prefix_cache()
        engine.reset_tiers(("l1",))
        cold = serve(engine, SimRequest("cold", prompt, 2))
        assert cold.tier_tokens == {"l2": 15 * 256}
        assert real.measured_read_bytes == 15 * real.stored_bytes
        assert real.measured_read_s > 0
        assert real.time_factor == pytest.approx(real.model_chunk_bytes / real.stored_bytes)
        assert engine.reset_tiers(("l2",)) == {"l2": 16} and real.chunk_count() == 0
    finally:
        real.close()


def test_serve_with_real_tier_over_http(tmp_path):
    request = {"model": "fxctl-sim/lab-0.5b", "prompt": list(range(3000, 3000 + 2048)), "max_tokens": 2}
    with sim_server("lab", "--real-tier", str(tmp_path / "l2"), time_scale=0) as client:
        client.json("POST", "/v1/completions", request)
        client.json("POST", "/reset_prefix_cache")
        client.json("POST", "/reset_tiers", {"tiers": ["l1"]})
        again = client.json("POST", "/v1/completions", request)
        assert again["fxctl_sim"]["prompt_tokens_from"]["l2"] == 7 * 256
        assert value(client.metrics(), "fxctl_tier_hits_total", tier="l2") == 7
    assert any((tmp_path / "l2").iterdir())
