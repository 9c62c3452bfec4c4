"""The warm-up completion each vLLM engine gets once it is ready (fxctl.serve.deploy, ray_deploy): vLLM's
first request after a start pays a one-off cost in its sampling path (1.8-2 s on the CPU build,
benchmarks/README.md, where a restart's time goes) that the first user's request would pay otherwise."""

from __future__ import annotations

import json

from fxctl.remote.command import sh
from fxctl.serve.render import InstancePlan
from fxctl.serve.roles import Role

WARM_UP_TIMEOUT_S = 300.0   # at most, after the engine is ready (and never past start's --ready-timeout)

# Runs on the host: POST the JSON body argv[2] to argv[1]/v1/completions, print its seconds or its error as
# one JSON line. argv: base URL, body, timeout.
WARM_UP = r"""
import json, sys, time, urllib.request
request = urllib.request.Request(sys.argv[1] + "/v1/completions", sys.argv[2].encode(),
                                 {"Content-Type": "application/json"})
started = time.monotonic()
try:
    with urllib.request.urlopen(request, timeout=float(sys.argv[3])) as r:
        r.read()
    print(json.dumps({"seconds": round(time.monotonic() - started, 3)}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)[:200]}))
"""
WARM_UP_TOKENS = 16
# asked as clients ask: streamed, greedy, logprobs, exactly WARM_UP_TOKENS output tokens
WARM_UP_BODY = {"prompt": "fxctl warm-up", "max_tokens": WARM_UP_TOKENS, "min_tokens": WARM_UP_TOKENS,
                "ignore_eos": True, "temperature": 0, "logprobs": 1, "stream": True}


def warm_up(machine, plan: InstancePlan, model: str, timeout_s: float) -> str:
    """One completion on a vLLM engine that has just become ready, asked as clients ask (streamed, 16 output
    tokens, logprobs): vLLM's first request after a start pays a one-off cost in its sampling path (1.8-2 s
    on the CPU build, benchmarks/README.md, where a restart's time goes) that the first user's request would
    pay otherwise. Its prompt is shorter than a KV chunk: LMCache stores nothing of it. What happened, for the
    start's output; a failed warm-up does not fail the start (the engine answered /health)."""
    if plan.role != Role.ENGINE or plan.engine != "vllm":
        return ""
    body = json.dumps({"model": model, **WARM_UP_BODY})
    res = machine.run(sh("python3", "-c", WARM_UP, f"http://127.0.0.1:{plan.port}", body, f"{timeout_s:g}"),
                      timeout=timeout_s + 30)
    try:
        answer = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = {"error": res.tail(2) or f"exit {res.exit_code}"}
    if "seconds" in answer:
        return f"warmed up: one streamed completion ({WARM_UP_TOKENS} tokens, logprobs) in {answer['seconds']:.2f} s"
    return f"warm-up request failed ({answer['error']}); the engine is ready, the first request may be slower"
