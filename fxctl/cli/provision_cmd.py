"""`fxctl provision`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("provision", "Provision NVMe-oF RAID0 arrays from the inventory.", 4)
