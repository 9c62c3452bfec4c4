"""`fxctl lab`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("lab", "Run a QEMU test lab with NVMe-oF, Soft-RoCE, md RAID and XFS.", 3)
