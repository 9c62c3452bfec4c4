"""serve's pre-flight reads a host as facts (fxctl.facts.serving): pure parsers of real output, and one batch
for the whole reading (one SSH round trip), its judgements in provision's result words."""

from __future__ import annotations

import sys

from fxctl.engine.apply import Status
from fxctl.engine.fact import gather_facts
from fxctl.facts.serving import BusyPorts, FreeSpace, GpuCount, MemAvailable, MountOf, PythonEnv, PythonPlatform
from fxctl.remote.journal import RunJournal
from fxctl.remote.machine import LocalMachine


def test_mount_of_a_folder_on_the_array_and_on_no_mount():
    # the lab's initiator: findmnt's line for the array's mount, readlink -f of /dev/md/kvtier
    said = "parent\t/mnt/kvtier\nfindmnt\t0\t/dev/md/kvtier xfs    /mnt/kvtier\nreal\t/dev/md127\n"
    assert MountOf("/mnt/kvtier/fxtier").parse(said) == {
        "parent": "/mnt/kvtier", "source": "/dev/md/kvtier", "fstype": "xfs", "target": "/mnt/kvtier",
        "device": "/dev/md127"}
    missing = "parent\t/\nfindmnt\t127\tsh: 1: findmnt: not found\n"
    assert MountOf("/x").parse(missing) == {"parent": "/", "error": "sh: 1: findmnt: not found"}


def test_free_space_with_and_without_the_stores_it_counts():
    said = "parent\t/mnt/kvtier\ndf\t    Avail 1099511627776 \nheld\t4096\n"
    assert FreeSpace("/mnt/kvtier/fxtier", ("/a",)).parse(said) == {
        "parent": "/mnt/kvtier", "held": 4096, "free": 1099511627776}
    failed = "parent\t/\ndf\tdf: /: Permission denied \n"
    assert FreeSpace("/").parse(failed) == {"parent": "/", "held": 0, "error": "df: /: Permission denied"}


def test_probes_turn_a_failed_tool_into_a_value_not_a_failed_reading():
    assert GpuCount("cuda").parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                  "driver\n", 9)["error"].startswith("NVIDIA-SMI has failed")
    assert GpuCount("cuda").parse("GPU 0: NVIDIA H200 (UUID: GPU-1)\nGPU 1: NVIDIA H200 (UUID: GPU-2)\n") == {
        "count": 2}
    assert BusyPorts((8000, 8001)).parse("8001\n") == {"busy": [8001]}
    assert BusyPorts((8000,)).parse("sh: 1: python3: not found\n", 127) == {"error": "sh: 1: python3: not found"}
    assert PythonEnv("/opt/env/bin/python", ()).parse("Traceback ...\nImportError: boom\n", 1) == {
        "error": "Traceback ...\nImportError: boom"}
    assert PythonEnv("python3", ()).parse('noise\n{"missing": [], "versions": {"vllm": "0.32"}}\n') == {
        "missing": [], "versions": {"vllm": "0.32"}}
    assert MemAvailable().parse("MemTotal: 10 kB\nMemAvailable:    2048 kB\n") == 2048 * 1024
    assert MemAvailable().parse("", 1) is None
    assert PythonPlatform("python3").parse("3.11 x86_64\n") == {"version": "3.11", "machine": "x86_64"}
    assert PythonPlatform("/x/python").parse("sh: 1: /x/python: not found\n", 127) == {
        "error": "sh: 1: /x/python: not found"}


def test_the_same_facts_read_here_for_real():
    facts = gather_facts(LocalMachine(), {"env": PythonEnv(sys.executable, ("yaml", "no_such_module_here")),
                                          "none": PythonEnv("/no/such/python", ()), "mem": MemAvailable(),
                                          "space": FreeSpace("/no/such/folder/below/root")}, timeout=120)
    assert facts["env"]["missing"][0].startswith("no_such_module_here: ModuleNotFoundError")
    assert facts["env"]["fxctl_path"].endswith("fxctl") and facts["env"]["fxctl_hash"]
    assert "not found" in facts["none"]["error"] and facts["mem"] > 0
    assert facts["space"]["parent"] == "/" and facts["space"]["free"] > 0


def test_pre_flight_reads_a_host_in_one_batch_and_answers_in_provisions_words(tmp_path):
    from fxctl.serve.preflight import host_facts, run_preflight
    from fxctl.serve.settings import settings_from
    from fxctl.sim.profile import load_profile

    settings = settings_from(load_profile("h200-70b"), engine="sim", l2_dir=str(tmp_path / "l2"),
                             state_dir=str(tmp_path / "state"), python=sys.executable, l2_bytes=2**30)
    machine = LocalMachine(RunJournal(tmp_path / "journal.jsonl"))
    result = run_preflight(machine, settings, install=False, local=True)
    entries = machine.journal.entries()
    read = len(host_facts(settings, "local", result.site_dir))
    assert [e["batched"] for e in entries] == [read] * read   # every fact, one command to the host
    assert {c.check: c.status for c in result.checks} == {
        "mount": Status.WARN, "space": Status.OK, "fxctl": Status.OK, "gpus": Status.OK, "ports": Status.OK}
    assert all(isinstance(c.status, Status) for c in result.checks)


def test_a_check_made_from_a_word_holds_the_status_the_table_renders():
    from fxctl.serve.preflight import Check

    check = Check("host0", "same versions", "failed", "ray 2.9 vs 2.10")   # as ray_deploy and serve.compat say it
    assert check.status is Status.FAILED and check.status.value == "failed"
