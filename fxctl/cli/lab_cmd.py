"""`fxctl lab`: a QEMU test lab with real NVMe-oF, Soft-RoCE, md RAID and XFS (library: fxctl.lab)."""

from __future__ import annotations

import subprocess
import sys

import click

from fxctl.cli import lab_fault_cmd
from fxctl.cli.lab_options import name_option
from fxctl.errors import BadInput, FxError
from fxctl.lab.topology import DEFAULT_MEMORY_MIB
from fxctl.output import dumps, emit


def progress(message: str) -> None:
    click.echo(f"lab: {message}", err=True)


def install_deps_option(func):
    return click.option("--install-deps", is_flag=True,
                        help="apt-get install missing host packages (root on Debian only).")(func)


@click.group("lab")
def command():
    """Run a QEMU test lab with NVMe-oF, Soft-RoCE, md RAID and XFS.

    \b
    Guests are Debian bookworm under QEMU (TCG), reachable by SSH on 127.0.0.1 only.
    Image cache: $XDG_CACHE_HOME/fxctl/lab (~/.cache); state: $XDG_STATE_HOME/fxctl/lab/NAME.
    Typical use:  fxctl lab up && fxctl lab inventory > lab.yaml && fxctl -i lab.yaml ...
    """


@command.command("build")
@click.option("--force", is_flag=True, help="Rebuild even when the image for this recipe is cached.")
@install_deps_option
@click.pass_obj
def build_cmd(app, force, install_deps):
    """Build (or find cached) the guest kernel and root filesystem."""
    from fxctl.lab.image import ensure_image

    image = ensure_image(force=force, install_deps=install_deps, progress=progress)
    info = {"key": image.key, "folder": str(image.folder), **image.describe()}
    emit(info, app.output_format, text=f"image {image.key}\n  {image.vmlinux}\n  {image.initramfs}")


@command.command("up")
@click.option("--targets", default=1, show_default=True, type=click.IntRange(1, 8), help="Storage target guests.")
@click.option("--initiators", default=1, show_default=True, type=click.IntRange(1, 8), help="Initiator guests.")
@click.option("--drives", default=4, show_default=True, type=click.IntRange(1, 16),
              help="Emulated NVMe drives per target.")
@click.option("--paths", default=1, show_default=True, type=click.IntRange(1, 4),
              help="Private links between each target and initiator: 2 or more give NVMe multipath arrays.")
@click.option("--drive-size", default="256M", show_default=True, help="Size of each drive (sparse file).")
@click.option("--memory", "memory_mib", default=DEFAULT_MEMORY_MIB, show_default=True, type=click.IntRange(768, 16384),
              help="MiB of RAM per guest.")
@name_option
@install_deps_option
@click.pass_obj
def up_cmd(app, targets, initiators, drives, paths, drive_size, memory_mib, lab_name, install_deps):
    """Start the lab (building the image first if needed) and wait until every guest answers SSH."""
    from fxctl.lab.lab import up
    from fxctl.lab.topology import LabSpec, parse_size

    spec = LabSpec(name=lab_name, targets=targets, initiators=initiators, drives=drives, paths=paths,
                   drive_size=parse_size(drive_size), memory_mib=memory_mib)
    result = up(spec, install_deps=install_deps, progress=progress)
    if not result.already_running:
        progress(f"lab {lab_name} is up in {result.seconds:.0f} s")
    _emit_status(app, result.state)


@command.command("down")
@name_option
@click.option("--purge", is_flag=True, help="Also remove the lab's state folder (keys: new host keys next time).")
@click.pass_obj
def down_cmd(app, lab_name, purge):
    """Stop exactly this lab's QEMU processes and free its ports."""
    from fxctl.lab.lab import destroy, down

    if purge:
        destroy(lab_name, progress=progress)
    else:
        down(lab_name, progress=progress)


@command.command("status")
@name_option
@click.pass_obj
def status_cmd(app, lab_name):
    """Show the lab's guests: role, state, SSH port, private-link addresses, drives."""
    from fxctl.lab.state import LabState

    state = LabState.load(lab_name)
    if state is None:
        raise BadInput(f"no lab named {lab_name}", "start one with 'fxctl lab up'")
    _emit_status(app, state)


def _emit_status(app, state) -> None:
    from fxctl.lab.qemu import is_guest_process

    rows, data = [], []
    for g in state.guests:
        running = is_guest_process(g.pid, state.name, g.name)
        private = " ".join(f"{link.netdev}={link.address}" for link in g.links)
        rows.append([g.name, g.role, "running" if running else "stopped", f"127.0.0.1:{g.ssh_port}",
                     g.pid if running else "-", private, len(g.drives)])
        data.append({"name": g.name, "role": g.role, "running": running, "ssh_port": g.ssh_port,
                     "pid": g.pid if running else None, "private": [link.address for link in g.links],
                     "drives": [d.serial for d in g.drives]})
    emit({"lab": state.name, "image": state.image_key, "guests": data}, app.output_format, rows=rows,
         headers=["guest", "role", "state", "ssh", "pid", "private link", "drives"])


@command.command("ssh", context_settings={"ignore_unknown_options": True})
@name_option
@click.argument("host")
@click.argument("remote_command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def ssh_cmd(ctx, lab_name, host, remote_command):
    """Open a shell on a guest, or run CMD there (host key checked against the lab's known_hosts)."""
    from fxctl.lab.access import ssh_argv

    state, guest = _running_guest(lab_name, host)
    tty = not remote_command and sys.stdin.isatty()
    code = subprocess.run(ssh_argv(state, guest, list(remote_command), tty=tty)).returncode
    ctx.exit(code)


def _running_guest(lab_name: str, host: str):
    from fxctl.lab.qemu import is_guest_process
    from fxctl.lab.state import LabState

    state = LabState.load(lab_name)
    if state is None:
        raise BadInput(f"no lab named {lab_name}", "start one with 'fxctl lab up'")
    guest = state.guest(host)
    if guest is None:
        raise BadInput(f"lab {lab_name} has no guest {host!r}",
                       f"guests: {', '.join(g.name for g in state.guests)}")
    if not is_guest_process(guest.pid, state.name, guest.name):
        raise FxError(f"{host} is not running", "start the lab with 'fxctl lab up'")
    return state, guest


@command.command("inventory")
@name_option
@click.option("--write", "write_to", type=click.Path(dir_okay=False, writable=True),
              help="Write the inventory to this file instead of printing it.")
@click.pass_obj
def inventory_cmd(app, lab_name, write_to):
    """Print an fxctl inventory for the running lab (YAML; -o json for JSON), host keys pinned."""
    from fxctl.lab.inventory import render_inventory
    from fxctl.lab.lab import is_running
    from fxctl.lab.state import LabState

    state = LabState.load(lab_name)
    if not is_running(state):
        raise FxError(f"lab {lab_name} is not running", "start it with 'fxctl lab up'")
    text = dumps(render_inventory(state), "json" if app.output_format == "json" else "yaml")
    if write_to:
        with open(write_to, "w") as handle:
            handle.write(text + "\n")
        progress(f"inventory written to {write_to}")
    else:
        click.echo(text)


command.add_command(lab_fault_cmd.command)
