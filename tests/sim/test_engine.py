"""The engine in virtual time: scheduling, prefix cache, preemption, tiers, cost model, fixed delays."""

import pytest

from fxctl.sim.cost import ScheduledWork, roofline_model
from fxctl.sim.engine import Engine, RequestRejected
from fxctl.sim.profile import load_profile
from fxctl.sim.request import SimRequest
from fxctl.sim.virtual import distinct_prompts, run_closed_loop


def lab(**overrides):
    return load_profile("lab").with_overrides(**overrides)


def serve_all(engine: Engine, requests: list[SimRequest]) -> list[SimRequest]:
    for req in requests:
        req.arrival = engine.now
        engine.add_request(req)
    for _ in range(100_000):
        if not engine.has_work():
            return requests
        engine.step()
    raise AssertionError("engine did not drain")


def prompt(n: int, start: int = 1000) -> list[int]:
    return list(range(start, start + n))


def test_a_request_gets_exactly_max_tokens_and_a_first_token_after_prefill():
    engine = Engine(lab())
    (req,) = serve_all(engine, [SimRequest("a", prompt(1000), 20)])
    assert req.generated == 20 and req.finish_reason == "length"
    assert 0 < req.ttft() < req.e2e()
    assert engine.stats.generation_tokens == 20 and engine.stats.requests_finished == 1
    assert engine.pool.num_free == engine.pool.num_blocks  # everything released


def test_repeated_prompt_hits_the_hbm_prefix_cache_and_is_faster():
    engine = Engine(lab(), offload=False)
    (first,) = serve_all(engine, [SimRequest("a", prompt(4000), 4)])
    (second,) = serve_all(engine, [SimRequest("b", prompt(4000), 4)])
    assert first.cached_tokens == 0
    assert second.cached_tokens == 3984  # 250 full blocks cached; the last is recomputed to sample
    assert engine.stats.prefix_hits == second.cached_tokens
    assert second.ttft() < first.ttft() / 10


def test_reset_prefix_cache_then_l1_serves_the_prefix_then_l2():
    engine = Engine(lab())
    (cold,) = serve_all(engine, [SimRequest("a", prompt(4096), 2)])
    engine.reset_prefix_cache()
    (from_l1,) = serve_all(engine, [SimRequest("b", prompt(4096), 2)])
    engine.reset_prefix_cache()
    engine.reset_tiers(("l1",))
    (from_l2,) = serve_all(engine, [SimRequest("c", prompt(4096), 2)])
    assert from_l1.cached_tokens == 0 and from_l1.tier_tokens == {"l1": 15 * 256}
    assert from_l2.tier_tokens == {"l2": 15 * 256}
    assert engine.stats.tier_hits == {"l1": 15, "l2": 15}
    assert from_l1.ttft() < from_l2.ttft() < cold.ttft()


def test_no_offload_recomputes_after_a_prefix_cache_reset():
    engine = Engine(lab(), offload=False)
    (cold,) = serve_all(engine, [SimRequest("a", prompt(4096), 2)])
    engine.reset_prefix_cache()
    (again,) = serve_all(engine, [SimRequest("b", prompt(4096), 2)])
    assert again.tier_tokens == {} and engine.stats.tier_hits == {"l1": 0, "l2": 0}
    assert again.ttft() == pytest.approx(cold.ttft(), rel=1e-6)


def test_preemption_when_hbm_is_full_and_every_request_still_completes():
    engine = Engine(lab(serving__num_gpu_blocks=200), offload=False)  # 3200 tokens of KV
    reqs = [SimRequest(f"r{i}", prompt(900, start=10_000 * (i + 1)), 400) for i in range(4)]
    serve_all(engine, reqs)
    assert engine.stats.preemptions > 0
    assert sum(r.preemptions for r in reqs) == engine.stats.preemptions
    assert all(r.generated == 400 for r in reqs)
    assert engine.pool.num_free == 200


def test_requests_that_can_never_fit_are_rejected():
    engine = Engine(lab(serving__num_gpu_blocks=10))
    with pytest.raises(RequestRejected, match="more KV blocks"):
        engine.add_request(SimRequest("big", prompt(1000), 10))
    with pytest.raises(RequestRejected, match="context length"):
        Engine(lab()).add_request(SimRequest("long", prompt(40_000), 10))


def test_prefill_cost_grows_faster_than_linearly_with_context():
    model = roofline_model(load_profile("mi308x-qwen3-coder-480b-tp8"))
    chunk_at = lambda ctx: model.step_seconds([ScheduledWork(8192, ctx, True)])  # noqa: E731
    assert chunk_at(120_000) > 3 * chunk_at(0)  # attention over the context dominates late chunks


def test_decode_step_time_grows_with_batch_kv_and_expert_coverage():
    model = roofline_model(load_profile("mi308x-qwen3-coder-480b-tp8"))
    one = model.step_seconds([ScheduledWork(1, 80_000)])
    sixteen = model.step_seconds([ScheduledWork(1, 80_000)] * 16)
    assert sixteen > one
    assert model.weights_touched(1) < model.weights_touched(16) < model.weight_bytes


def test_fixed_delays_give_exact_ttft_and_tpot_in_model_time():
    engine = Engine(load_profile("fixed-delays"))
    (req,) = serve_all(engine, [SimRequest("a", prompt(500), 11)])
    assert req.ttft() == pytest.approx(0.100)
    assert (req.e2e() - req.ttft()) / 10 == pytest.approx(0.010)


def test_closed_loop_run_is_deterministic():
    profile = lab()
    runs = [run_closed_loop(Engine(profile), distinct_prompts(12, 3000, 0.25), 4, 8) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].requests == 12 and runs[0].output_tokens == 96


def test_a_request_is_not_scheduled_before_it_arrives():
    """The HTTP runner resumes an idle engine at the first new arrival; a second request stamped later (it
    came in before the loop ran) must wait for its own arrival, or its TTFT comes out negative (issue 18 #9)."""
    engine = Engine(lab())
    first, later = SimRequest("a", prompt(100), 4), SimRequest("b", prompt(100, start=5000), 4)
    first.arrival, later.arrival = 0.0, 5.0
    engine.add_request(first)
    engine.add_request(later)
    engine.step()
    assert later.computed == 0 and first.computed > 0
    while first.finished_at is None:
        engine.step()
    assert engine.next_event_delay() == pytest.approx(5.0 - engine.now)
    engine.idle_until(5.0)
    while engine.has_work():
        engine.step()
    assert later.ttft() > 0 and later.first_token_at > 5.0
