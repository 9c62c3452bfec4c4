"""Files baked into every lab guest image: the boot-time seed unit, sshd settings, and boot trims.

The image is the same for every guest and holds no key. Each guest's identity (SSH host key,
authorized client key, hostname, hostnqn/hostid, private-link addresses) arrives at boot as a small
tar archive through QEMU's fw_cfg (`-fw_cfg name=opt/io.fxctl.lab/seed,file=...`), read by
fxctl-lab-seed.service before sshd starts.
"""

from __future__ import annotations

from pathlib import Path

SEED_FW_CFG_NAME = "opt/io.fxctl.lab/seed"
GUEST_ENV_PATH = "etc/fxctl-lab/guest.env"

SEED_SCRIPT = r"""#!/bin/sh
# fxctl lab: apply this guest's seed (identity and addresses) from QEMU fw_cfg, before sshd starts.
set -eu
modprobe qemu_fw_cfg
modprobe virtio_net
seed=/sys/firmware/qemu_fw_cfg/by_name/opt/io.fxctl.lab/seed/raw
i=0
while [ ! -r "$seed" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
cat "$seed" > /run/fxctl-lab-seed.tar
tar -x --no-same-owner -f /run/fxctl-lab-seed.tar -C /
rm -f /run/fxctl-lab-seed.tar
chmod 600 /etc/ssh/ssh_host_ed25519_key
chmod 700 /root/.ssh
chmod 600 /root/.ssh/authorized_keys
. /etc/fxctl-lab/guest.env
hostname "$LAB_HOSTNAME"
netdev_with_mac() {
    for dev in /sys/class/net/*; do
        if [ "$(cat "$dev/address")" = "$1" ]; then basename "$dev"; return 0; fi
    done
    echo "fxctl-lab-seed: no netdev with MAC $1" >&2
    return 1
}
ip link set lo up
mgmt=$(netdev_with_mac "$LAB_MGMT_MAC")
ip addr add 10.0.2.15/24 dev "$mgmt"
ip link set "$mgmt" up
# LAB_LINKS: "MAC=ADDRESS/PREFIX ..." one per private link, MTU 9000
for link in $LAB_LINKS; do
    dev=$(netdev_with_mac "${link%%=*}")
    ip link set "$dev" mtu 9000
    ip addr add "${link#*=}" dev "$dev"
    ip link set "$dev" up
done
echo "fxctl-lab-seed: $LAB_HOSTNAME ready" > /dev/kmsg
"""

SEED_UNIT = """[Unit]
Description=fxctl lab: apply this guest's seed (keys, identity, addresses)
DefaultDependencies=no
After=systemd-modules-load.service local-fs.target
Before=ssh.service network-pre.target sysinit.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/fxctl-lab-seed

[Install]
WantedBy=sysinit.target
"""

SSHD_CONFIG = """# fxctl lab: one host key, injected per guest at boot; keys only, root allowed
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""

# units that only slow a stateless lab guest down
MASKED_UNITS = (
    "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
    "fstrim.timer", "systemd-timesyncd.service", "mdmonitor-oneshot.timer", "mdcheck_start.timer",
    "mdcheck_continue.timer", "getty@tty1.service", "systemd-networkd-wait-online.service",
    "rdma-ndd.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount", "modprobe@drm.service",
    "modprobe@efi_pstore.service", "modprobe@fuse.service", "modprobe@loop.service", "modprobe@dm_mod.service",
    "sys-kernel-debug.mount", "sys-kernel-tracing.mount", "dev-hugepages.mount", "sys-fs-fuse-connections.mount",
    "systemd-logind.service", "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service",
    "systemd-random-seed.service", "systemd-sysusers.service", "systemd-journal-flush.service",
)

# the journal stays in RAM (/run): guests are stateless, and flushing it costs seconds under TCG
JOURNALD_CONFIG = "[Journal]\nStorage=volatile\n"

# units a guest may use but should not start at boot (fxctl provision can enable them)
DISABLED_UNITS = ("nvmf-autoconnect.service",)

# modules udev would load at boot for nothing (no nested virtualisation, no hardware crypto in a lab)
MODPROBE_BLACKLIST = "".join(f"blacklist {m}\n" for m in (
    "kvm", "kvm_amd", "kvm_intel", "irqbypass", "ccp", "efi_pstore", "pcspkr", "aesni_intel",
    "ghash_clmulni_intel", "sha512_ssse3", "sha256_ssse3", "sha1_ssse3", "polyval_clmulni",
))

NETWORK_HOSTS = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"


def write_overlay(root: Path) -> None:
    """Lay the files every guest image gets under `root` (synced into the rootfs by mmdebstrap)."""
    files = {
        "usr/local/sbin/fxctl-lab-seed": (SEED_SCRIPT, 0o755),
        "etc/systemd/system/fxctl-lab-seed.service": (SEED_UNIT, 0o644),
        "etc/ssh/sshd_config.d/fxctl-lab.conf": (SSHD_CONFIG, 0o644),
        "etc/hosts": (NETWORK_HOSTS, 0o644),
        "etc/hostname": ("lab\n", 0o644),
        "etc/fstab": ("# fxctl lab: the root filesystem is the initramfs\n", 0o644),
        "etc/modprobe.d/fxctl-lab.conf": (MODPROBE_BLACKLIST, 0o644),
        "etc/systemd/journald.conf.d/fxctl-lab.conf": (JOURNALD_CONFIG, 0o644),
    }
    for rel, (text, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    _link(root / "etc/systemd/system/sysinit.target.wants/fxctl-lab-seed.service",
          "/etc/systemd/system/fxctl-lab-seed.service")
    _link(root / "etc/systemd/system/default.target", "/lib/systemd/system/multi-user.target")
    for unit in MASKED_UNITS:
        _link(root / "etc/systemd/system" / unit, "/dev/null")


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)
