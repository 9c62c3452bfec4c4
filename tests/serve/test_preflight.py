"""Pre-flight on this machine, for real: each failure names host, check and fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fxctl.engine.fact import gather_facts
from fxctl.facts.serving import count_gpus
from tests.conftest import sim_serve_inventory

REPO = Path(__file__).resolve().parents[2]

NVIDIA_SMI_L = """GPU 0: NVIDIA H200 (UUID: GPU-5d1e6c8a-2f0b-4c1e-9a51-1f7e0c3b2a10)
GPU 1: NVIDIA H200 (UUID: GPU-8a0f3b2c-6d4e-4f1a-b2c3-9e8d7c6b5a40)
"""
ROCM_SMI_SHOWID_CSV = """device,Device Name,Device ID,Device Rev,Subsystem ID,GUID
card0,AMD Instinct MI308X,0x74a2,0x00,0x74a2,28851
card1,AMD Instinct MI308X,0x74a2,0x00,0x74a2,51499
card2,AMD Instinct MI308X,0x74a2,0x00,0x74a2,57603
card3,AMD Instinct MI308X,0x74a2,0x00,0x74a2,22683
"""


def test_gpu_counts_from_the_vendor_tools():
    assert count_gpus("cuda", NVIDIA_SMI_L) == 2
    assert count_gpus("rocm", ROCM_SMI_SHOWID_CSV) == 4
    assert count_gpus("cuda", "") == 0


def test_vllm_preflight_on_a_plain_disk_names_host_check_and_fix(tmp_path):
    # an nvidia-smi that fails as it does without a driver, first on PATH: the GPU check fails the same way
    # on every machine, GPUs or not (no assertion that holds only where nvidia-smi is absent)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\"\n"
                    "exit 9\n")
    fake.chmod(0o755)
    env = {**os.environ, "FXCTL_SERVE_STATE": str(tmp_path / "state"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("FXCTL_INVENTORY", None)
    res = subprocess.run([sys.executable, "-m", "fxctl", "serve", "start", "--profile", "h200-70b", "--local",
                          "--l2-dir", str(tmp_path / "l2"), "--l1-size", "1GiB", "--l2-size", "1GiB"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 1
    assert "pre-flight failed" in res.stderr
    assert f"local: mount: {tmp_path / 'l2'} is on" in res.stderr and "not an md array" in res.stderr
    assert "fix: put serve.l2_dir on the provisioned array's mount" in res.stderr
    assert "local: gpus: `nvidia-smi -L` failed" in res.stderr and "couldn't communicate" in res.stderr
    assert "fix: install the cuda driver" in res.stderr
    # nothing was launched
    assert not (tmp_path / "state" / "main").exists()
    # for scripts, the same checks: each with its status, the failed ones with their fix
    res = subprocess.run([sys.executable, "-m", "fxctl", "-o", "json", "serve", "start", "--profile", "h200-70b",
                          "--local", "--l2-dir", str(tmp_path / "l2"), "--l1-size", "1GiB", "--l2-size", "1GiB"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    local = json.loads(res.stdout)["local"]
    assert res.returncode == 1 and local["ok"] is False and "pre-flight failed" in local["error"]
    checks = {c["check"]: c for c in local["checks"]}
    assert checks["mount"]["status"] == checks["gpus"]["status"] == "failed" and checks["gpus"]["fix"]
    assert checks["ports"]["status"] == "ok" and local["instances"] == []


def test_upgrading_to_mp_mode_names_the_warm_in_process_tier_and_keeps_it(tmp_path):
    """Issue 14.4: an in-process tier left by an older fxctl is neither used silently nor touched."""
    from fxctl.remote.machine import LocalMachine
    from fxctl.serve.preflight import Preflight, host_facts, judge_migration
    from fxctl.serve.settings import settings_from
    from fxctl.sim.profile import load_profile

    old = tmp_path / "main-0" / "rank0of8"
    old.mkdir(parents=True)
    (old / "journal.0").write_bytes(b"warm")
    settings = settings_from(load_profile("mi308x-qwen3-coder-480b-tp8"), l2_dir=str(tmp_path))
    def migration(settings, result):
        facts = host_facts(settings, "local", None)
        old = gather_facts(LocalMachine(), {"old tiers": facts["old tiers"]})["old tiers"] \
            if "old tiers" in facts else None
        judge_migration(settings, old, result)

    result = Preflight("local")
    migration(settings, result)
    (check,) = result.checks
    assert check.status == "warn" and f"{tmp_path}/main-0" in check.detail and "--lmcache-mode in-process" in check.fix
    assert (old / "journal.0").read_bytes() == b"warm"
    in_process = settings_from(load_profile("mi308x-qwen3-coder-480b-tp8"), l2_dir=str(tmp_path),
                               lmcache_mode="in-process")
    quiet = Preflight("local")
    migration(in_process, quiet)
    assert quiet.checks == []


@pytest.mark.sshd
def test_a_state_dir_too_small_for_the_wheels_fails_before_any_upload(ssh_world, tmp_path):
    # a host whose serve.state_dir is on a 16 MiB filesystem (a tmpfs; a lab guest's root held 78 MB): the
    # dependency wheels (about 17 MB, 60 MB unpacked) do not fit, and pre-flight says so before uploading
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(small)], check=True)
    try:
        inventory = sim_serve_inventory(ssh_world, tmp_path / "inv.yaml", l2_dir=tmp_path / "l2",
                                        state_dir=small / "state")
        env = {k: v for k, v in os.environ.items() if k != "FXCTL_INVENTORY"}
        res = subprocess.run([sys.executable, "-m", "fxctl", "-i", str(inventory), "serve", "start", "--name",
                              "small"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 1, res.stdout + res.stderr
        line = next((x for x in res.stderr.splitlines() if "host0: state-space:" in x), None)
        assert line and f"{small / 'state'}:" in line and "MB free on" in line and "wheels needs about" in line, \
            res.stderr
        assert "fix: free space there, or set serve.state_dir" in res.stderr
        assert not (small / "state" / "wheelhouse").exists() and not (small / "state" / "site").exists()
    finally:
        subprocess.run(["umount", str(small)], check=False)
