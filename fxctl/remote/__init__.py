"""Running commands on hosts: commands as values, SSH with verified host keys, results per host."""

from fxctl.remote.command import Command, Secret, sh

__all__ = ["Command", "Secret", "sh"]
