"""A deployment's settings from `fxctl serve`'s options (fxctl.cli.serve_cmd.settings_options): the profile,
the inventory's serve section, then the options; shared by `serve start` and `serve monitor`."""

from __future__ import annotations

import shlex
import sys

from fxctl.errors import BadInput


def settings_of(options: dict, where, inventory):
    """ServeSettings for the options given (names as settings_options declares them) on `where`."""
    from fxctl.paths import tiny_model_dir
    from fxctl.serve.settings import settings_from
    from fxctl.serve.tiny_model import TINY_MODEL_NAME
    from fxctl.serve.where import default_l2_dir, state_dir_for
    from fxctl.sim.profile import load_profile

    spec = inventory.serve if inventory is not None else None
    profile_name = options["profile_name"] or (spec.profile if spec else None)
    if not profile_name:
        raise BadInput("no profile", "pass --profile NAME (see profiles/) or set serve.profile in the inventory")
    profile = load_profile(profile_name)
    model = options["model"]
    if model is None and where.local and profile.get("model", "name") == TINY_MODEL_NAME:
        model = str(tiny_model_dir())   # the model `fxctl serve make-model` made on this machine
    command = options["engine_command"]
    given = {k: options[k] for k in (
        "name", "engine", "offload", "lmcache_mode", "tensor_parallel", "pipeline_parallel", "instances", "port",
        "max_num_seqs", "l1_bytes", "l2_bytes", "time_scale", "router_mode", "router_policy", "router_port",
        "metrics_address")}
    return settings_from(
        profile, spec, profile=profile_name, model=model,
        l2_dir=options["l2_dir"] or (spec.l2_dir if spec else None) or default_l2_dir(inventory, where),
        python=options["python"] or (sys.executable if where.local else None), state_dir=state_dir_for(where),
        engine_command=tuple(shlex.split(command)) if command else None, **given)
