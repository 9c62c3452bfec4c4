"""A deployment's settings from `fxctl serve`'s options (fxctl.cli.serve_cmd.settings_options): the profile,
the inventory's serve section, then the options; shared by `serve start` and `serve monitor`."""

from __future__ import annotations

import shlex
import sys

from fxctl.errors import BadInput

# resolved here, from the inventory and this machine, before settings_from sees them; every other override
# goes to settings_from as it was given
RESOLVED_HERE = ("profile_name", "model", "l2_dir", "python", "engine_command")


def settings_of(options: dict, where, inventory):
    """ServeSettings for the options given (fxctl.serve.overrides.ServeOverrides) on `where`."""
    from dataclasses import asdict

    from fxctl.cli.option_model import given
    from fxctl.paths import tiny_model_dir
    from fxctl.serve.overrides import ServeOverrides
    from fxctl.serve.settings import settings_from
    from fxctl.serve.tiny_model import TINY_MODEL_NAME
    from fxctl.serve.where import default_l2_dir, state_dir_for
    from fxctl.sim.profile import load_profile

    spec = inventory.serve if inventory is not None else None
    chosen = asdict(ServeOverrides(**given(ServeOverrides, options)))
    profile_name = chosen["profile_name"] or (spec.profile if spec else None)
    if not profile_name:
        raise BadInput("no profile", "pass --profile NAME (see profiles/) or set serve.profile in the inventory")
    profile = load_profile(profile_name)
    model = chosen["model"]
    if model is None and where.local and profile.get("model", "name") == TINY_MODEL_NAME:
        model = str(tiny_model_dir())   # the model `fxctl serve make-model` made on this machine
    command = chosen["engine_command"]
    overrides = {k: v for k, v in chosen.items() if k not in RESOLVED_HERE}
    return settings_from(
        profile, spec, profile=profile_name, model=model,
        l2_dir=chosen["l2_dir"] or (spec.l2_dir if spec else None) or default_l2_dir(inventory, where),
        python=chosen["python"] or (sys.executable if where.local else None), state_dir=state_dir_for(where),
        engine_command=tuple(shlex.split(command)) if command else None, name=options.get("name"), **overrides)
