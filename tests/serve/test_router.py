"""The router role (issue 17.1): its plan over the inventory's hosts (golden), when it is deployed, its settings
through profile -> inventory -> command line with each layer validated, and the parsers of what replicas served.

Regenerate the golden with FXCTL_UPDATE_GOLDEN=1 (then review the diff)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fxctl.errors import BadInput
from fxctl.inventory import InventoryInvalid, load_inventory_text
from fxctl.serve import deploy, router
from fxctl.serve.launch import InstanceStatus
from fxctl.serve.preflight import Preflight
from fxctl.serve.replica_metrics import engine_counters, hit_rates, host_summaries, router_counters
from fxctl.serve.router_settings import DEFAULT_POLICY, POLICIES
from fxctl.serve.settings import settings_from
from fxctl.serve.where import Where, select
from fxctl.sim.profile import load_profile, parse_profile
from tests.golden import check_golden_file

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "serve" / "router-two-hosts.json"
INVENTORY = """version: 1
hosts:
  gpu1: {address: 10.0.0.11}
  gpu2: {address: 10.0.0.12}
  edge: {address: 10.0.0.5}
serve:
  hosts: [gpu1, gpu2]
  profile: cpu-tiny
  l2_dir: /mnt/kvtier/fxtier
"""


def two_hosts(extra: str = "", **overrides):
    inventory = load_inventory_text(INVENTORY + extra, "inv.yaml")
    where = select(inventory, (), False)
    settings = settings_from(load_profile("cpu-tiny"), inventory.serve, python="/opt/env/bin/python", **overrides)
    return settings, where


def test_golden_router_in_front_of_two_hosts():
    settings, where = two_hosts()
    plans = deploy.dry_run(settings, where)
    got = {"plans": [{"host": p.host, "role": p.role, "unit": p.unit, "port": p.port, "argv": list(p.argv),
                      "env": p.env, "log_path": p.log_path, "state_path": p.state_path} for p in plans]}
    check_golden_file(GOLDEN, got)
    (last,) = [p for p in plans if p.role == "router"]
    assert plans[-1] is last and last.host == "gpu1"              # after every engine, on the first serving host
    assert list(last.router.workers) == ["http://10.0.0.11:8000", "http://10.0.0.12:8000"]
    assert last.router.policy == DEFAULT_POLICY and last.port == 8080 and last.metrics_port == 8081


def test_router_host_port_and_policy_from_the_inventory():
    settings, where = two_hosts("  router: {host: edge, port: 9000, policy: round_robin}\n")
    plan = deploy.router_plan(settings, where)
    assert (plan.host, plan.port, plan.router.policy) == ("edge", 9000, "round_robin")
    assert [h.name for h in where.with_router().hosts] == ["gpu1", "gpu2", "edge"]   # status/stop look there too
    # the command line wins over the inventory
    settings, where = two_hosts("  router: {policy: round_robin}\n", router_policy="consistent_hash")
    assert deploy.router_plan(settings, where).router.policy == "consistent_hash"


@pytest.mark.parametrize("extra, message", [
    ("  router: {policy: fastest}\n", "serve.router.policy: 'fastest' is not allowed"),
    ("  router: {port: 65535}\n", "serve.router.port"),
    ("  router: {mode: sometimes}\n", "serve.router.mode"),
    ("  router: {hosts: edge}\n", "serve.router.hosts: unknown key"),
])
def test_bad_router_settings_name_file_line_key(extra, message):
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(INVENTORY + extra, "inv.yaml")
    assert any(str(p).startswith("inv.yaml:10: ") and message in str(p) for p in info.value.problems), \
        [str(p) for p in info.value.problems]


def test_router_host_must_be_an_inventory_host():
    with pytest.raises(BadInput, match="serve.router.host 'nowhere' is not an inventory host"):
        two_hosts("  router: {host: nowhere}\n")


def test_profile_policy_is_validated_and_read():
    profile = load_profile("cpu-tiny")
    raw = yaml.safe_load(profile.path.read_text())
    raw["serving"]["router"] = {"policy": "power_of_two"}
    assert parse_profile(raw, profile.path).get("serving", "router.policy") == "power_of_two"
    settings = settings_from(parse_profile(raw, profile.path), l2_dir="/tmp/l2")
    assert settings.router.policy == "power_of_two"
    raw["serving"]["router"] = {"policy": "kv_aware"}     # vllm-router has it, fxctl refuses it (needs KV events)
    with pytest.raises(BadInput, match="serving.router.policy: 'kv_aware' is not allowed"):
        parse_profile(raw, profile.path)
    with pytest.raises(BadInput, match="router policy 'nope'"):
        settings_from(profile, l2_dir="/tmp/l2", router_policy="nope")
    assert set(POLICIES) >= {"cache_aware", "round_robin", "consistent_hash"}


def test_when_a_router_is_deployed():
    profile = load_profile("cpu-tiny")
    one = settings_from(profile, l2_dir="/tmp/l2")
    assert not router.wanted(one, 1)                             # one vLLM: nothing to route
    assert router.wanted(one, 2)                                 # two hosts of one instance each
    assert router.wanted(settings_from(profile, l2_dir="/tmp/l2", instances=2), 1)
    assert not router.wanted(settings_from(profile, l2_dir="/tmp/l2", instances=2, router_mode="off"), 1)
    assert router.wanted(settings_from(profile, l2_dir="/tmp/l2", router_mode="on"), 1)
    assert not router.wanted(settings_from(profile, l2_dir="/tmp/l2", engine="sim", instances=2), 1)
    local = deploy.dry_run(settings_from(profile, l2_dir="/tmp/l2", instances=2), Where())
    assert [p.role for p in local] == ["lmcache-server", "engine", "engine", "router"]
    assert list(local[-1].router.workers) == ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]


def test_stop_order_router_first_server_last():
    settings, where = two_hosts()
    plans = deploy.dry_run(settings, where)
    order = deploy.stop_order([(p, "process") for p in reversed(plans) if p.host == "gpu1"])
    assert [p.role for p, _ in order] == ["router", "engine", "lmcache-server"]


def test_with_policy_keeps_workers_and_ports():
    settings, where = two_hosts()
    plan = deploy.router_plan(settings, where)
    other = router.with_policy(plan, "round_robin")
    assert other.router.policy == "round_robin" and other.router.workers == plan.router.workers
    assert other.port == plan.port and other.unit == plan.unit
    assert other.argv == router.router_argv(other.router) and "round_robin" in other.argv   # argv made from it


def test_the_routers_state_is_data_and_old_state_files_still_read():
    from fxctl.serve.render import InstancePlan

    settings, where = two_hosts()
    plan = deploy.router_plan(settings, where)
    saved = plan.to_dict()
    assert saved["router"]["workers"] == list(plan.router.workers) and saved["router"]["policy"] == DEFAULT_POLICY
    assert InstancePlan.from_dict(saved) == plan
    before = {k: v for k, v in saved.items() if k != "router"}    # written before the router's state was data
    assert InstancePlan.from_dict(before).router == plan.router


VLLM_METRICS = """# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 6.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 4000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3000.0
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 768.0
"""
ROUTER_METRICS = """# TYPE vllm_router_processed_requests_total counter
vllm_router_processed_requests_total{worker="http://127.0.0.1:9102"} 2
vllm_router_processed_requests_total{worker="http://127.0.0.1:9101"} 5
# TYPE vllm_router_worker_health gauge
vllm_router_worker_health{worker="http://127.0.0.1:9102"} 1
vllm_router_worker_health{worker="http://127.0.0.1:9101"} 0
"""


def test_parsers_of_what_replicas_served():
    counters = engine_counters(VLLM_METRICS)
    assert counters == {"requests": 8.0, "prefix_queries": 4000.0, "prefix_hits": 3000.0,
                        "external_queries": 1000.0, "external_hits": 768.0}
    assert hit_rates(counters) == {"prefix_hit_rate": 0.75, "external_hit_rate": 0.768}
    assert router_counters(ROUTER_METRICS) == {"http://127.0.0.1:9101": {"requests": 5.0, "healthy": 0.0},
                                               "http://127.0.0.1:9102": {"requests": 2.0, "healthy": 1.0}}


def test_host_rows_sum_engines_and_tiers():
    def status(host, role, index, load=None, tier=None):
        return InstanceStatus(host, "main", index, "vllm", role, "process", f"u{index}", 1, True, True, [],
                              8000 + index, "/log", tier=tier, load=load)
    counters = engine_counters(VLLM_METRICS)
    tier = {"l2": {"hits": 3.0, "misses": 1.0, "hit_rate": 0.75, "read_bytes": 10.0}}
    rows = host_summaries([status("a", "lmcache-server", -1, tier=tier), status("a", "engine", 0, counters),
                           status("a", "engine", 1, counters), status("b", "engine", 0, counters),
                           status("a", "router", -2, {"workers": {}})])
    a, b = rows
    assert (a["host"], a["engines"], a["ready"], a["served"]["requests"]) == ("a", 2, 2, 16.0)
    assert a["served"]["prefix_hit_rate"] == 0.75 and a["tier"]["l2"]["hits"] == 3.0
    assert (b["host"], b["engines"], b["tier"]) == ("b", 1, None)


def test_serve_model_may_be_a_folder_on_the_hosts():
    inventory = load_inventory_text(INVENTORY + "  model: /srv/models/tiny-llama\n", "inv.yaml")
    assert inventory.serve.model == "/srv/models/tiny-llama"
    with pytest.raises(InventoryInvalid, match="absolute path of a model folder"):
        load_inventory_text(INVENTORY + "  model: /srv/../etc\n", "inv.yaml")


def test_the_routers_pre_flight_facts_parse_what_the_host_said():
    assert router.RouterVersion("py").parse("0.1.10\n") == {"version": "0.1.10"}
    assert router.RouterVersion("py").parse("Traceback ...\nModuleNotFoundError: No module named 'vllm_router'\n",
                                            1) == {"error": "ModuleNotFoundError: No module named 'vllm_router'"}
    assert router.Unreachable(("http://a:1",)).parse("") == {"bad": []}
    said = "http://a:1 (URLError: [Errno 111] Connection refused)\n"
    assert router.Unreachable(("http://a:1",)).parse(said) == {"bad": [said.strip()]}
    checked = Preflight("edge")
    router.judge_workers("edge", ["http://a:1"], {"bad": [said.strip()]}, checked)
    assert checked.failed and "Connection refused" in checked.failed[0].detail
