"""fxctl sim: an OpenAI-compatible serving emulator with an explicit GPU cost model (simulated timing).

    profile.py   profiles/*.yaml loaded and validated: every cost-model number with its source
    cost.py      the roofline step time (prefill FLOPs incl. attention's quadratic term; decode bytes) and
                 HBM KV capacity; or fixed delays for testing load generators
    tokens.py    tokenizer-free token ids and chained block hashes
    blocks.py    HBM KV blocks with vLLM's prefix cache
    tier_model.py shared links (processor sharing, per-request cap) and chunk indexes
    connector.py L1 + L2 as LMCache's connector sees them (fxctl's tier or LMCache's stock disk tier)
    real_l2.py   L2 through the real fxctl.kvtier store (--real-tier)
    engine.py    continuous batching in model time: admission, preemption, tier loads, offload
    virtual.py   the engine in virtual time (closed-loop clients) for calibration and tests
    calibrate.py the R2 calibration
    runner.py, app.py, metrics.py, server.py   the engine in real time behind aiohttp
"""
