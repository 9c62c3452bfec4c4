"""`fxctl sim`."""

from fxctl.cli.not_implemented import not_implemented_group

command = not_implemented_group("sim", "Serving emulator (simulated GPU) with a calibrated cost model.", 7)
