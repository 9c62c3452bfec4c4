"""`fxctl profiles`: the profiles that ship inside the package (list, show)."""

from __future__ import annotations

import click

from fxctl.output import emit


@click.group(name="profiles")
def command():
    """Profiles that ship with fxctl: platform, model and serving layout, every cost-model number with its
    source. Any command's --profile takes one of these names or a YAML path."""


@command.command(name="list")
@click.pass_obj
def list_command(app):
    """Shipped profiles: name, model, description."""
    from fxctl.errors import BadInput
    from fxctl.shipped import profile_path, shipped_names
    from fxctl.sim.profile import load_profile

    rows = []
    for name in shipped_names("profiles"):
        try:
            profile = load_profile(name)
            rows.append({"name": name, "model": profile.get("model", "name", ""),
                         "description": profile.description, "path": str(profile_path(name))})
        except BadInput as exc:
            rows.append({"name": name, "model": "", "description": f"invalid: {exc.message}",
                         "path": str(profile_path(name))})
    emit(rows, app.output_format if app else "table", rows=[(r["name"], r["model"], r["description"]) for r in rows],
         headers=["name", "model", "description"])


@command.command(name="show")
@click.argument("name")
@click.pass_obj
def show_command(app, name):
    """A profile's YAML as shipped (comments included); -o json/yaml: its path and parsed content."""
    import yaml

    from fxctl.shipped import profile_path

    path = profile_path(name)
    text = path.read_text()
    if app is not None and app.output_format in ("json", "yaml"):
        emit({"name": path.stem, "path": str(path), "content": yaml.safe_load(text)}, app.output_format)
        return
    click.echo(f"# {path}\n{text}", nl=False)
