"""The router's life cycle through `fxctl serve` with real vllm-router (from the serving env) in front of two
emulator instances on this machine: start (router last, its URL the endpoint, requests routed), status (per
instance, per host, the router's spread), restart (router stopped first, started last), stop (router first).
Light: the emulator, no vLLM (about 20 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

from tests.support.sshd import free_port


def fxctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", *args], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())


def complete(url: str, prompt: str) -> None:
    body = json.dumps({"model": "fxctl-tiny-llama", "prompt": prompt, "max_tokens": 2}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/completions", body,
                                                       {"Content-Type": "application/json"}), timeout=60) as r:
        assert json.loads(r.read())["choices"]


def test_router_life_cycle_in_front_of_emulators(serving_python, local_state, tmp_path):
    port = free_port()
    args = ["--local", "--name", "rs", "--engine", "sim", "--profile", "cpu-tiny", "--model", "fxctl-tiny-llama",
            "--python", serving_python, "--l2-dir", str(tmp_path / "l2"), "--port", str(port), "--instances", "2",
            "--router", "on", "--router-policy", "round_robin", "--router-port", str(free_port()),
            "--time-scale", "0"]
    try:
        started = fxctl("serve", "start", *args)
        assert started.returncode == 0, started.stdout + started.stderr
        local = json.loads(started.stdout)["local"]
        assert [i["unit"] for i in local["instances"]] == ["fxctl-serve-rs-0", "fxctl-serve-rs-1", "fxctl-router-rs"]
        endpoint = local["endpoint"]
        for n in range(4):
            complete(endpoint, f"prompt {n}")
        status = json.loads(fxctl("serve", "status", "--local").stdout)
        (routed,) = [s for s in status["instances"] if s["role"] == "router"]
        assert [w["requests"] for w in routed["load"]["workers"].values()] == [2.0, 2.0]   # round robin
        assert status["hosts"][0]["engines"] == 2 and status["hosts"][0]["ready"] == 2
        # fxctl tune sweeps the policy: the router restarted per policy through fxctl serve, the engines kept
        tuned = fxctl("tune", "--target", "url", "--url", endpoint.removesuffix("/v1"), "--workload", "long-context",
                      "--param", "serving.router.policy=cache_aware,round_robin", "--slo", "ttft_p50<=60s",
                      "--grid", "--concurrency", "1", "--requests-per-client", "2", "--prompt-tokens", "64",
                      "--output-tokens", "2", "--run-dir", str(tmp_path / "tune"))
        assert tuned.returncode == 0, tuned.stdout + tuned.stderr
        trials = json.loads(tuned.stdout)["trials"]
        assert sorted(t["settings"] for t in trials) == ["router.policy=cache_aware", "router.policy=round_robin"]
        assert all(t["completed"] == 2 for t in trials)
        after = json.loads(fxctl("serve", "status", "--local").stdout)["instances"]
        assert [s["pid"] for s in after if s["role"] == "engine"] == [s["pid"] for s in status["instances"]
                                                                       if s["role"] == "engine"]
        # cold-recovery load through the router on consistent_hash: each prompt is a session (x-session-id),
        # so the prompts spread over the replicas and each replay goes where its prompt went
        from fxctl.loadgen.generator import LoadSpec, run
        from fxctl.loadgen.workloads import WorkloadSpec
        from fxctl.serve.deploy import switch_local_policy

        base = endpoint.removesuffix("/v1")
        switch_local_policy(base, "consistent_hash")
        replicas = (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}")
        cold = run(LoadSpec(base, WorkloadSpec("cold-recovery", 512, 512, output_tokens=2), concurrency=2,
                            requests=8, time_scale=0.01, replicas=replicas))
        assert cold["completed"] == 8 and cold["phases"]["evict"] == {"reset_prefix_cache": 200, "reset_tiers_l1": 200}
        spread = json.loads(fxctl("serve", "status", "--local").stdout)["instances"]
        (routed,) = [s for s in spread if s["role"] == "router"]
        counts = sorted(w["requests"] for w in routed["load"]["workers"].values())
        assert sum(counts) == 16 and counts[0] >= 2 and all(c % 2 == 0 for c in counts)   # fill + replay alike
        restarted = json.loads(fxctl("serve", "restart", "--local", "--name", "rs").stdout)["local"]
        assert [i["unit"] for i in restarted["instances"]][-1] == "fxctl-router-rs"
        assert restarted["endpoint"] == endpoint
        complete(endpoint, "after the restart")
    finally:
        stopped = json.loads(fxctl("serve", "stop", "--local", "--name", "rs").stdout)["stopped"]
    assert [s["unit"] for s in stopped] == ["fxctl-router-rs", "fxctl-serve-rs-0", "fxctl-serve-rs-1"]
    assert all(s["was_running"] for s in stopped)
