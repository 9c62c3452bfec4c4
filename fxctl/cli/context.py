"""What every command receives: global options and lazy access to the validated inventory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fxctl.errors import BadInput

if TYPE_CHECKING:
    from fxctl.inventory.model import Inventory


@dataclass
class App:
    inventory_path: str | None = None
    output_format: str = "table"
    verbose: int = 0
    show_traceback: bool = False
    _inventory: Inventory | None = field(default=None, repr=False)

    def inventory(self) -> Inventory:
        """The validated inventory; BadInput (exit 2) listing every problem otherwise."""
        if self._inventory is None:
            from fxctl.inventory import load_inventory

            if not self.inventory_path:
                raise BadInput("no inventory given",
                               "pass -i FILE or set FXCTL_INVENTORY (see examples/inventory.yaml)")
            self._inventory = load_inventory(Path(self.inventory_path))
        return self._inventory
