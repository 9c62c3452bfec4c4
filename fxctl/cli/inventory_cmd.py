"""`fxctl inventory`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("inventory", "Check and show the inventory.", 2)
