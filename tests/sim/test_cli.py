"""`fxctl sim` at the command line: help says emulator, profiles show sources, bad input exits 2."""

import subprocess
import sys

from click.testing import CliRunner

from fxctl.cli import cli

from .support import REPO


def test_help_of_every_sim_command_says_emulator():
    for args in (["sim", "--help"], ["sim", "serve", "--help"], ["sim", "calibrate", "--help"],
                 ["sim", "profile", "--help"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0 and "EMULATOR" in result.output, args


def test_profile_command_lists_sources_and_derived_capacity():
    result = CliRunner().invoke(cli, ["-o", "yaml", "sim", "profile", "mi308x-qwen3-coder-480b-tp8"])
    assert result.exit_code == 0
    assert "fitted to R2" in result.output and "hbm_kv_blocks: 427442" in result.output


def test_bad_profile_is_bad_input_with_exit_2():
    proc = subprocess.run([sys.executable, "-m", "fxctl", "sim", "serve", "--profile", "no-such-profile"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no such profile: no-such-profile" in proc.stderr and "hint:" in proc.stderr


