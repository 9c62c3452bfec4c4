"""Validators for values that reach shell commands: each returns None when fine, else what is allowed.

They are strict on purpose: a value from an inventory is quoted when it reaches a command, and it also
has to be a well-formed NQN, address, device path or interface name, so that nothing surprising (a space,
a slash in a configfs name, a leading dash read as an option) gets that far.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Callable

from fxctl import units

Validator = Callable[[Any], "str | None"]

_NQN_LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
NQN_RE = re.compile(rf"nqn\.[0-9]{{4}}-(0[1-9]|1[0-2])\.{_NQN_LABEL}(\.{_NQN_LABEL})*(:[A-Za-z0-9._:@+-]+)?")
NQN_MAX = 223  # bytes, NVMe base specification
IFNAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,14}")
RDMA_DEV_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")
BY_ID_RE = re.compile(r"/dev/disk/by-id/[A-Za-z0-9][A-Za-z0-9._:+@-]*")
SERIAL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
HOSTNAME_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
MOUNT_RE = re.compile(r"(/[A-Za-z0-9._-]+)+")
MOUNT_OPTION_RE = re.compile(r"[A-Za-z0-9_.:-]+(=[A-Za-z0-9_.:/@-]+)?")
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@:-]{0,199}")
HOST_KEY_LINE_RE = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521) [A-Za-z0-9+/]+={0,2}( \S.*)?")
FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}=?")


def nqn(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string NQN such as nqn.2026-11.io.example:array1"
    if len(value.encode()) > NQN_MAX:
        return f"is longer than {NQN_MAX} bytes"
    if not NQN_RE.fullmatch(value):
        return ("is not an NVMe Qualified Name: nqn.YYYY-MM.<reverse domain>[:<identifier>], "
                "lower-case domain, identifier of letters, digits and ._:@+-")
    return None


def ip_address(value: Any) -> str | None:
    text = str(value)
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return "must be an IPv4 or IPv6 address"
    if "%" in text and not IFNAME_RE.fullmatch(text.partition("%")[2]):
        return "must be an IPv4 or IPv6 address (an IPv6 zone is an interface name)"  # ipaddress takes any zone
    return None


def ip_interface(value: Any) -> str | None:
    if not isinstance(value, str) or "/" not in value or ip_address(value.partition("/")[0]):
        return "must be an address with a prefix length, such as 198.51.100.11/24"
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        return "must be an address with a prefix length, such as 198.51.100.11/24"
    return None


def host_address(value: Any) -> str | None:
    """An IP address or a DNS name; a name whose last label is all digits ("12345", "10.0.0.256") is
    neither (RFC 3696: a top-level domain is never all-numeric), so it is refused rather than resolved."""
    if not isinstance(value, str):
        return "must be an IP address or a DNS host name"
    if ip_address(value) is None:
        return None
    if HOSTNAME_RE.fullmatch(value) and not value.rpartition(".")[2].isdigit():
        return None
    if value.replace(".", "").isdigit():
        return "is neither an IP address nor a DNS host name (all digits, but not a valid IPv4 address)"
    return "must be an IP address or a DNS host name"


def ifname(value: Any) -> str | None:
    if isinstance(value, str) and IFNAME_RE.fullmatch(value) and value not in (".", ".."):
        return None
    return "must be a network interface name: 1-15 of letters, digits and _.:- (not starting with - or .)"


def rdma_device(value: Any) -> str | None:
    if isinstance(value, str) and RDMA_DEV_RE.fullmatch(value):
        return None
    return "must be an RDMA device name such as mlx5_0 or rxe0"


def by_id_path(value: Any) -> str | None:
    if isinstance(value, str) and BY_ID_RE.fullmatch(value) and ".." not in value:
        return None
    return "must be a /dev/disk/by-id/ path (never /dev/nvmeXnY, which changes across boots)"


def serial(value: Any) -> str | None:
    if isinstance(value, (str, int)) and SERIAL_RE.fullmatch(str(value)):
        return None
    return "must be a drive serial: 1-40 of letters, digits and ._-"


def name(value: Any) -> str | None:
    if isinstance(value, str) and NAME_RE.fullmatch(value):
        return None
    return "must be a name: 1-63 of letters, digits and _.- starting with a letter or digit"


def user(value: Any) -> str | None:
    if isinstance(value, str) and USER_RE.fullmatch(value):
        return None
    return "must be a POSIX user name (lower-case letters, digits, _ and -)"


def mount_point(value: Any) -> str | None:
    if isinstance(value, str) and MOUNT_RE.fullmatch(value) and "/../" not in value + "/" and \
            "/./" not in value + "/":
        return None
    return "must be an absolute path other than / (letters, digits and ._-), such as /mnt/kvtier"


# Mounting the array over one of these would hide what the system lives in (a mount covers the directory):
# whole trees the OS and its packages own, and top-level folders it needs as they are.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/usr")
SYSTEM_DIRS = ("/home", "/root", "/tmp", "/var", "/var/lib", "/var/log", "/var/cache", "/var/tmp", "/var/spool",
               "/var/run", "/var/lib/dpkg", "/var/lib/systemd", "/opt", "/srv", "/mnt", "/media")


def textfile_path(value: Any) -> str | None:
    """A file for node-exporter's textfile collector: an absolute path ending in .prom."""
    if isinstance(value, str) and MOUNT_RE.fullmatch(value) and value.endswith(".prom") and "/../" not in value:
        return None
    return "must be an absolute path ending in .prom (letters, digits and ._-), such as " \
           "/var/lib/prometheus/node-exporter/fxctl-array.prom"


def array_mount(value: Any) -> str | None:
    """Where an array's XFS is mounted: a mount point, and not over a directory the system lives in."""
    if reason := mount_point(value):
        return reason
    if value in SYSTEM_DIRS or any(value == tree or value.startswith(tree + "/") for tree in SYSTEM_TREES):
        return ("would cover a directory the system lives in (mounting hides what is there); use a folder "
                "of its own such as /mnt/kvtier")
    return None


def mount_option(value: Any) -> str | None:
    if isinstance(value, str) and MOUNT_OPTION_RE.fullmatch(value):
        return None
    return "must be a mount option such as noatime or logbsize=256k"


# XFS's mount options (Documentation/admin-guide/xfs.rst) and the generic ones fstab lines carry; the values
# XFS accepts for the sized ones (a value outside them makes `mount` fail after the array was built)
XFS_FLAGS = {"attr2", "noattr2", "discard", "nodiscard", "grpid", "bsdgroups", "nogrpid", "sysvgroups",
             "inode32", "inode64", "largeio", "nolargeio", "noalign", "norecovery", "nouuid", "noquota", "uquota",
             "usrquota", "uqnoenforce", "quota", "gquota", "grpquota", "gqnoenforce", "pquota", "prjquota",
             "pqnoenforce", "swalloc", "wsync", "ikeep", "noikeep", "filestreams", "dax",
             "noatime", "atime", "relatime", "norelatime", "strictatime", "nodiratime", "lazytime", "nolazytime",
             "ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async", "defaults",
             "nofail", "_netdev", "noauto", "auto", "user", "nouser"}
XFS_SIZED = {"logbsize": (16 << 10, 256 << 10), "allocsize": (4 << 10, 1 << 30), "biosize": (4 << 10, 1 << 30)}
XFS_VALUED = {"logbufs": (2, 8), "sunit": (0, 1 << 30), "swidth": (0, 1 << 30)}
XFS_NAMED = {"dax": ("always", "never", "inode"), "logdev": None, "rtdev": None, "context": None,
             "fscontext": None, "defcontext": None, "rootcontext": None}


def xfs_mount_option(value: Any) -> str | None:
    """A mount option XFS (or fstab) knows, with a value XFS accepts."""
    if reason := mount_option(value):
        return reason
    name, _, arg = value.partition("=")
    if name.startswith("x-"):        # x-systemd.*, x-mount.*: read by systemd and mount, not by XFS
        return None
    if not arg:
        return None if name in XFS_FLAGS else "is not an XFS mount option (see `man 5 xfs`)"
    if name in XFS_SIZED:
        low, high = XFS_SIZED[name]
        size_ = parse_size(arg)
        if size_ is None or size_ & (size_ - 1) or not low <= size_ <= high:
            return f"{name} must be a power of two from {low >> 10}k to {high >> 10}k, such as 256k"
        return None
    if name in XFS_VALUED:
        low, high = XFS_VALUED[name]
        if not arg.isdigit() or not low <= int(arg) <= high:
            return f"{name} must be an integer from {low} to {high}"
        return None
    if name in XFS_NAMED:
        allowed = XFS_NAMED[name]
        return None if allowed is None or arg in allowed else f"{name} must be one of {', '.join(allowed)}"
    return "is not an XFS mount option with a value (see `man 5 xfs`)"


def xfs_label(value: Any) -> str | None:
    if reason := name(value):
        return reason
    return None if len(value) <= 12 else "is longer than 12 characters, the most an XFS label holds (mkfs.xfs -L)"


def model(value: Any) -> str | None:
    if isinstance(value, str) and (MODEL_RE.fullmatch(value) or (
            value.startswith("/") and MODEL_RE.fullmatch(value[1:]) and "/../" not in f"{value}/")):
        return None
    return ("must be a model name such as Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 or the absolute path of a model "
            "folder on the hosts")


def kv_cache_dtype(value: Any) -> str | None:
    from fxctl.serve.vllm_flags import KV_CACHE_DTYPE_RE

    if isinstance(value, str) and re.fullmatch(KV_CACHE_DTYPE_RE, value):
        return None
    return "must be a name of vLLM's --kv-cache-dtype, such as auto or fp8 (vLLM's own parser checks it)"


def host_key(value: Any) -> str | None:
    if isinstance(value, str) and (HOST_KEY_LINE_RE.fullmatch(value) or FINGERPRINT_RE.fullmatch(value)):
        return None
    return "must be an OpenSSH public key line ('ssh-ed25519 AAAA...') or a fingerprint 'SHA256:...'"


def parse_size(value: Any) -> int | None:
    """fxctl.units.parse_size, without the spaces around the value it forgives on a command line: an
    inventory value with a trailing newline must never pass (it would reach fstab and configfs)."""
    if isinstance(value, str) and value != value.strip():
        return None
    return units.parse_size(value)


def size(value: Any) -> str | None:
    if parse_size(value) is None:
        return "must be a size in bytes or with a binary unit, such as 64K, 8GiB or 2TiB"
    return None


MD_CHUNK_MIN = 4 << 10   # md works in pages: a chunk below 4 KiB is refused by the kernel
MD_CHUNK_MAX = 64 << 20  # far above any useful RAID0 chunk; mdadm takes --chunk in whole KiB


def md_chunk(value: Any) -> str | None:
    """An md RAID chunk: a power of two from 4K to 64M (mdadm --chunk is in KiB, so 1000 bytes would
    become --chunk=0K)."""
    bytes_ = parse_size(value)
    if bytes_ is None or not MD_CHUNK_MIN <= bytes_ <= MD_CHUNK_MAX or bytes_ & (bytes_ - 1):
        return "must be a power of two from 4K to 64M, such as 64K or 512K"
    return None
