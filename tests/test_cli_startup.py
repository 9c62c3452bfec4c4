"""Start-up loads only what a command needs (issue 27 #6): `--version` and `--help` import no command module
and none of the heavy libraries; `inventory check` imports its own module and the inventory's, nothing of
serve, lab or the SSH stack. (How long that takes is benchmarks/startup.py's business, not a test's.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fxctl.cli import COMMANDS

PROBE = """
import json, sys
from fxctl.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
loaded = sorted(m for m in sys.modules if m.startswith(("fxctl", "paramiko", "fabric", "pydantic", "yaml",
                                                        "tabulate", "aiohttp", "prometheus_client", "numpy")))
print("\\n" + json.dumps({"code": code, "loaded": loaded}))
"""
HEAVY = ("paramiko", "fabric", "pydantic", "aiohttp", "prometheus_client", "numpy", "tabulate", "yaml")


def loaded_by(*args: str, cwd="/") -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


def command_modules(loaded: list[str]) -> set[str]:
    return {m.split(".")[2] for m in loaded if m.startswith("fxctl.cli.") and m.endswith("_cmd")}


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command_and_no_heavy_library(args):
    out = loaded_by(*args)
    assert out["code"] == 0
    assert command_modules(out["loaded"]) == set()
    assert not [m for m in out["loaded"] if m.split(".")[0] in HEAVY], out["loaded"]


def test_inventory_check_imports_only_what_it_needs(tmp_path):
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("version: 1\nhosts:\n  a: {address: 192.0.2.1}\n")
    out = loaded_by("-i", str(inventory), "inventory", "check")
    assert out["code"] == 0
    assert command_modules(out["loaded"]) == {"inventory_cmd"}
    # the inventory validates against leaf modules of serve's settings (router policies, vLLM flags, listen)
    leaves = ("fxctl.serve", "fxctl.serve.router_settings", "fxctl.serve.vllm_flags", "fxctl.serve.listen")
    assert not [m for m in out["loaded"] if m not in leaves and m.startswith((
        "fxctl.serve", "fxctl.lab", "fxctl.kvtier", "fxctl.remote.session", "paramiko", "fabric", "aiohttp",
        "numpy"))], out["loaded"]


def test_help_lists_every_command_with_its_own_summary():
    from click.testing import CliRunner

    from fxctl.cli import cli

    shown = CliRunner().invoke(cli, ["--help"]).output
    for name, (_module, summary) in COMMANDS.items():
        command = cli.get_command(None, name)
        assert command is not None and command.name == name
        # the summary `--help` prints (without importing the module) is the start of the command's own help
        assert command.get_short_help_str(limit=1000).startswith(summary.removesuffix("...")), name
        assert name in shown and summary.removesuffix("...")[:40] in " ".join(shown.split()), name
