"""Property: no string from an inventory reaches a command unquoted.

Whatever text a value holds, it arrives at the host as exactly one argument: through plain commands,
composed commands, file writes, and the sudo wrapper (a command nested as one quoted argument).
"""

from __future__ import annotations

import shlex
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxctl.engine.plan import run_operation
from fxctl.inventory.model import Host
from fxctl.ops.files import ensure_line
from fxctl.remote.command import AsArgument, sh
from fxctl.remote.session import as_sent

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@given(value=text)
def test_value_is_one_argument(value):
    command = sh("mdadm", "--detail", value).then(sh("echo", value))
    assert shlex.split(command.render()) == ["mdadm", "--detail", value, "&&", "echo", value]


@given(value=text)
def test_nested_command_survives_two_rounds_of_parsing(value):
    inner = sh("nvme", "connect", "-n", value)
    outer = sh("sudo", "-n", "--", "sh", "-c", AsArgument(inner))
    words = shlex.split(outer.render())
    assert words[:5] == ["sudo", "-n", "--", "sh", "-c"]
    assert shlex.split(words[5]) == ["nvme", "connect", "-n", value]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(value=text.filter(lambda s: "\n" not in s and "\r" not in s))
def test_shell_receives_exactly_the_value(value):
    """A real shell, not a model of one: printf prints the value back byte for byte."""
    host = Host(name="h", address="127.0.0.1", user="nobody", sudo=True)
    wrapped = as_sent(sh("printf", "%s", value), host)
    rendered = wrapped.render().replace("sudo -n -- ", "", 1)
    out = subprocess.run(["sh", "-c", rendered], capture_output=True, check=True).stdout
    assert out.decode("utf-8", errors="surrogateescape") == value


@given(line=text.filter(lambda s: "\n" not in s), marker=st.text(alphabet="abc:-", min_size=1, max_size=8))
def test_file_operations_quote_content(line, marker):
    step = run_operation("x", ensure_line("/etc/fstab", line, f"fxctl:{marker}", None))
    words = shlex.split(step.commands[0].render())
    assert words[:3] == ["printf", "%s", f"{line}  # fxctl:{marker}\n"]
