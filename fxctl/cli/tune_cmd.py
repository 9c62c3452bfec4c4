"""`fxctl tune`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("tune", "Find the best operating point under a latency SLO.", 9)
