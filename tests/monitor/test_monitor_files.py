"""`fxctl serve monitor`'s files checked by Prometheus's own tool: promtool check config/rules on what it
renders for the CPU deployment, a GPU profile's dry run and an inventory with arrays, and promtool test rules
feeding each alert the series that must fire it (and the ones that must not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fxctl.monitor import files
from fxctl.monitor.dashboard import PANELS
from fxctl.monitor.rules import Thresholds, alerts
from tests.support.strict_skips import need_tool

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def promtool():
    return need_tool("promtool", "prometheus")


def monitor(tmp_path, *args, inventory: str | None = None):
    cmd = [sys.executable, "-m", "fxctl", "-o", "json"]
    if inventory:
        path = tmp_path / "inventory.yaml"
        path.write_text(inventory)
        cmd += ["-i", str(path)]
    out = tmp_path / "out"
    done = subprocess.run([*cmd, "serve", "monitor", *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    return done, out


def check(promtool, out: Path) -> str:
    done = subprocess.run([promtool, "check", "config", str(out / files.SCRAPE_FILE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    rules = subprocess.run([promtool, "check", "rules", str(out / files.RULES_FILE)], capture_output=True,
                           text=True, timeout=60)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    return done.stdout + rules.stdout


def test_cpu_deployment_files_pass_promtool(promtool, tmp_path):
    done, out = monitor(tmp_path, "--local", "--profile", "cpu-tiny", "--l2-dir", "/var/tmp/fxtier",
                        "--port", "8211")
    assert done.returncode == 0, done.stderr
    said = check(promtool, out)
    assert f"{len(alerts(Thresholds())) + 3} rules found" in said
    targets = {t["job"]: t for t in json.loads(done.stdout)["targets"]}
    assert targets["fxctl-engine"]["address"] == "127.0.0.1:8211"
    assert targets["fxctl-tier"]["address"] == "127.0.0.1:8713"      # the server's tier metrics: port + 502
    assert targets["fxctl-engine"]["instance"] == "local/main-0" and targets["fxctl-engine"]["deployment"] == "main"
    dashboard = json.loads((out / files.DASHBOARD_FILE).read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) == sum(len(p.queries) for p in PANELS) and all("$deployment" in e or "array" in e for e in exprs)


def test_gpu_profile_dry_run_with_router_passes_promtool(promtool, tmp_path):
    done, out = monitor(tmp_path, "--profile", "mi308x-qwen3-coder-480b-tp4x2", "--l2-dir", "/mnt/kvtier/fxtier",
                        "--local")
    assert done.returncode == 0, done.stderr
    check(promtool, out)
    jobs = sorted(t["job"] for t in json.loads(done.stdout)["targets"])
    assert jobs == ["fxctl-engine", "fxctl-engine", "fxctl-router", "fxctl-tier"]   # 2 replicas: a router


def test_inventory_hosts_and_arrays(promtool, tmp_path):
    text = (ROOT / "examples" / "inventory.yaml").read_text()
    refused, _ = monitor(tmp_path, inventory=text)
    assert refused.returncode == 2 and "serve.metrics_address: 0.0.0.0" in refused.stderr
    text = text.replace("serve:\n", "serve:\n  metrics_address: 0.0.0.0\n", 1)
    refused, _ = monitor(tmp_path, inventory=text)
    assert refused.returncode == 2 and "monitoring.exporter_address" in refused.stderr
    done, out = monitor(tmp_path, inventory=text + "\nmonitoring: {exporter_address: 0.0.0.0, exporter_port: 9200}\n")
    assert done.returncode == 0, done.stderr
    check(promtool, out)
    scrape = yaml.safe_load((out / files.SCRAPE_FILE).read_text())
    arrays = next(j for j in scrape["scrape_configs"] if j["job_name"] == "fxctl-array")
    assert all(c["targets"][0].endswith(":9200") and c["labels"]["instance"].endswith("/array-exporter")
               for c in arrays["static_configs"])
    engines = next(j for j in scrape["scrape_configs"] if j["job_name"] == "fxctl-engine")
    assert {c["labels"]["host"] for c in engines["static_configs"]} == {"gpu1", "gpu2"}


def test_bad_thresholds_are_refused(tmp_path):
    done, _ = monitor(tmp_path, "--local", "--profile", "cpu-tiny", "--l2-dir", "/var/tmp/x", "--l2-full", "1.5")
    assert done.returncode == 2 and "--l2-full" in done.stderr


TIER = 'job="fxctl-tier",host="h",deployment="main",instance="h/main-lmcache"'
WHERE = {"host": "h", "deployment": "main", "instance": "h/main-lmcache"}


def description(name: str) -> str:
    return next(a for a in alerts(Thresholds()) if a["alert"] == name)["annotations"]["description"]


def fires(name: str, at: str, labels: dict, summary: str) -> dict:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{
        "exp_labels": labels, "exp_annotations": {"summary": summary, "description": description(name)}}]}


def silent(name: str, at: str) -> dict:
    return {"eval_time": at, "alertname": name, "exp_alerts": []}


CASES = [
    # tier errors rising fire; flat counters do not
    ([{"series": f'fxctl_tier_errors_total{{{TIER},tier="l2",kind="write"}}', "values": "0 0 0 5 10 15 20 25 30"}],
     [fires("FxctlTierErrors", "2m", {"severity": "warning", "kind": "write", **WHERE},
            "fxctl's tier on h/main-lmcache: 30 L2 write errors in 5 minutes"), silent("FxctlTierErrors", "30s")]),
    ([{"series": f'fxctl_tier_errors_total{{{TIER},tier="l2",kind="read"}}', "values": "3x12"}],
     [silent("FxctlTierErrors", "2m")]),
    # L2 95 % full for longer than `for`: fires; 50 %: not
    ([{"series": f'fxctl_tier_usage_bytes{{{TIER},tier="l2"}}', "values": "95x12"},
      {"series": f'fxctl_tier_max_capacity_bytes{{{TIER},tier="l2"}}', "values": "100x12"}],
     [fires("FxctlTierL2NearCap", "2m", {"severity": "warning", **WHERE}, "fxctl's L2 on h/main-lmcache is 95% full")]),
    ([{"series": f'fxctl_tier_usage_bytes{{{TIER},tier="l2"}}', "values": "50x12"},
      {"series": f'fxctl_tier_max_capacity_bytes{{{TIER},tier="l2"}}', "values": "100x12"}],
     [silent("FxctlTierL2NearCap", "2m")]),
    # after a restart (process started at 0 s) L2 misses every lookup: collapsed; hitting: not
    ([{"series": f'process_start_time_seconds{{{TIER}}}', "values": "0x12"},
      {"series": f'fxctl_tier_hits_total{{{TIER},tier="l2"}}', "values": "0x12"},
      {"series": f'fxctl_tier_misses_total{{{TIER},tier="l2"}}', "values": "0+10x12"}],
     [fires("FxctlTierHitRateCollapsed", "2m", {"severity": "warning", **WHERE},
            "fxctl's L2 hit rate on h/main-lmcache is 0% since its server restarted")]),
    ([{"series": f'process_start_time_seconds{{{TIER}}}', "values": "0x12"},
      {"series": f'fxctl_tier_hits_total{{{TIER},tier="l2"}}', "values": "0+9x12"},
      {"series": f'fxctl_tier_misses_total{{{TIER},tier="l2"}}', "values": "0+1x12"}],
     [silent("FxctlTierHitRateCollapsed", "2m")]),
    # long after the restart a low hit rate is the workload's, not a collapse
    ([{"series": f'process_start_time_seconds{{{TIER}}}', "values": "0x200"},
      {"series": f'fxctl_tier_hits_total{{{TIER},tier="l2"}}', "values": "0x200"},
      {"series": f'fxctl_tier_misses_total{{{TIER},tier="l2"}}', "values": "0+10x200"}],
     [silent("FxctlTierHitRateCollapsed", "45m")]),
    ([{"series": 'fxctl_array_degraded{job="fxctl-array",host="i1",deployment="-",instance="i1/array-exporter",'
                 'array="kv"}', "values": "0 0 1 1 1 1 1 1 1"}],
     [fires("FxctlArrayDegraded", "2m", {"severity": "critical", "host": "i1", "deployment": "-",
                                         "instance": "i1/array-exporter", "array": "kv", "job": "fxctl-array"},
            "array kv on i1 is degraded"), silent("FxctlArrayDegraded", "30s")]),
    ([{"series": 'up{job="fxctl-engine",host="h",deployment="main",instance="h/main-0"}', "values": "1 1 0 0 0 0 0 0"}],
     [fires("FxctlTargetDown", "2m", {"severity": "critical", "job": "fxctl-engine", "host": "h",
                                      "deployment": "main", "instance": "h/main-0"},
            "h/main-0 (fxctl-engine) does not answer its /metrics")]),
]


def test_every_alert_fires_on_its_condition_and_only_then(promtool, tmp_path):
    rendered = files.render([], Thresholds())
    (tmp_path / files.RULES_FILE).write_text(rendered[files.RULES_FILE])
    tests = [{"interval": "15s", "input_series": series, "alert_rule_test": checks} for series, checks in CASES]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({"rule_files": [files.RULES_FILE], "evaluation_interval": "15s",
                                                        "tests": tests}, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", "tests.yml"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {check["alertname"] for _, checks in CASES for check in checks}
    assert tested == {a["alert"] for a in alerts(Thresholds())}   # every alert has its case


def test_an_unwritable_out_dir_is_bad_input(tmp_path):
    (tmp_path / "afile").write_text("")
    done = subprocess.run([sys.executable, "-m", "fxctl", "serve", "monitor", "--local", "--profile", "cpu-tiny",
                           "--l2-dir", "/var/tmp/x", "--out", str(tmp_path / "afile" / "sub")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "cannot write the monitor files" in done.stderr and "Traceback" not in done.stderr
