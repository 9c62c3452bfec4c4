"""`fxctl net`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("net", "Configure and verify RoCEv2 lossless networking.", 5)
