"""L2 through the real `fxctl.kvtier` store (`--real-tier DIR`): storage time measured, not modelled.

Chunks are written and read at a scaled-down size (`bytes_scale`), and the measured read time is scaled
back up to model time, so a laptop disk stands in for the NVMe-oF array at the profile's chunk size.
"""

from __future__ import annotations

from pathlib import Path

from fxctl.errors import NotImplementedYet
from fxctl.sim.profile import Profile


def open_real_l2(profile: Profile, directory: Path):
    try:
        import fxctl.kvtier.store  # noqa: F401  (the store API: put, contains, get, stats)
    except ImportError as exc:
        raise NotImplementedYet(
            "--real-tier needs fxctl.kvtier's store, which is not in this checkout yet",
            "run without --real-tier (L2 timing is then modelled from the profile); tracked in issue 6") from exc
    raise NotImplementedYet("--real-tier is not wired to fxctl.kvtier yet",
                            "run without --real-tier (L2 timing is then modelled from the profile)")
