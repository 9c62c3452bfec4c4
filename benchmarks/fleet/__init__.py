"""Fleet-wide operations at scale: fxctl against fabric, pyinfra and ansible on the same local sshd hosts."""
