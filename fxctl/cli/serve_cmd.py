"""`fxctl serve`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("serve", "Launch vLLM + LMCache with fxctl's KV tier backend.", 8)
