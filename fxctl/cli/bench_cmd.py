"""`fxctl bench`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("bench", "Benchmarks: load generator and KV tier.", 9)
