"""`fxctl run`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("run", "Run a playbook of gated stages (G1-G4).", 10)
