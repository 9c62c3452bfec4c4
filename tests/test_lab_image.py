"""fxctl lab image recipe: the cache key, kernel resolution, vmlinux extraction, cpio, module trimming."""

from __future__ import annotations

import io
import lzma
import stat
import subprocess
import tarfile

import pytest

from fxctl.errors import FxError
from fxctl.lab import recipe
from fxctl.lab.cpio import CpioWriter, newc_header, tar_to_cpio
from fxctl.lab.kernel import check_host_suite, trimmed_paths, vmlinux_from_bzimage
from fxctl.lab.recipe import KernelRelease, parse_kernel_depends, recipe_key
from fxctl.lab.rootfs import mmdebstrap_argv

KERNEL = KernelRelease("linux-image-6.1.0-57-amd64", "6.1.192-3")

APT_CACHE_SHOW = """Package: linux-image-amd64
Source: linux-signed-amd64 (6.1.192+3)
Version: 6.1.192-3
Depends: linux-image-6.1.0-57-amd64 (= 6.1.192-3)
Description: Linux for 64-bit PCs (meta-package)
"""


def test_kernel_resolved_from_the_metapackage():
    kernel = parse_kernel_depends(APT_CACHE_SHOW)
    assert kernel == KERNEL
    assert kernel.abi == "6.1.0-57-amd64"


def test_unresolvable_kernel_says_to_update_apt():
    with pytest.raises(FxError) as info:
        parse_kernel_depends("")
    assert "apt-get update" in info.value.hint


def test_recipe_key_changes_with_each_ingredient():
    base = recipe_key(("a", "b"), KERNEL, "code1")
    assert base == recipe_key(("b", "a"), KERNEL, "code1"), "package order must not matter"
    assert base.startswith("bookworm-6.1.0-57-amd64-")
    others = {
        recipe_key(("a", "b", "c"), KERNEL, "code1"),
        recipe_key(("a", "b"), KernelRelease("linux-image-6.1.0-58-amd64", "6.1.200-1"), "code1"),
        recipe_key(("a", "b"), KernelRelease(KERNEL.package, "6.1.192-4"), "code1"),
        recipe_key(("a", "b"), KERNEL, "code2"),
    }
    assert base not in others and len(others) == 4


def test_build_code_digest_follows_the_build_sources(tmp_path):
    for name in recipe.BUILD_SOURCES:
        (tmp_path / name).write_text(f"# {name}\n")
    first = recipe.build_code_digest(tmp_path)
    (tmp_path / "rootfs.py").write_text("# changed\n")
    assert recipe.build_code_digest(tmp_path) != first


def test_vmlinux_is_the_xz_payload_of_the_bzimage():
    elf = b"\x7fELF" + bytes(range(256)) * 64
    decoy = lzma.compress(b"not a kernel", format=lzma.FORMAT_XZ)
    bzimage = b"MZ" + b"\0" * 500 + b"HdrS" + decoy + b"\0" * 3 + lzma.compress(elf, format=lzma.FORMAT_XZ) + b"\0" * 64
    assert vmlinux_from_bzimage(bzimage) == elf


def test_bzimage_without_xz_kernel_is_refused():
    with pytest.raises(FxError):
        vmlinux_from_bzimage(b"MZ" + b"\0" * 4096)


def test_host_must_be_bookworm():
    check_host_suite('ID=debian\nVERSION_CODENAME=bookworm\n')
    with pytest.raises(FxError) as info:
        check_host_suite('ID=ubuntu\nVERSION_CODENAME=noble\n')
    assert "noble" in info.value.message and "bookworm" in info.value.hint


def test_module_trimming_keeps_what_guests_load(tmp_path):
    kernel = tmp_path / "kernel"
    keep = ["drivers/nvme/target/nvmet-rdma.ko", "drivers/infiniband/sw/rxe/rdma_rxe.ko", "drivers/md/raid0.ko",
            "fs/xfs/xfs.ko", "fs/configfs/configfs.ko", "drivers/firmware/qemu_fw_cfg.ko",
            "drivers/net/virtio_net.ko", "net/ipv4/udp_tunnel.ko", "lib/libcrc32c.ko"]
    drop = ["sound/core/snd.ko", "drivers/gpu/drm/drm.ko", "drivers/net/wireless/foo.ko", "fs/btrfs/btrfs.ko",
            "drivers/infiniband/hw/mlx5/mlx5_ib.ko", "drivers/usb/core/usbcore.ko"]
    for rel in keep + drop:
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_bytes(b"ko")
    doomed = trimmed_paths(kernel)
    for rel in drop:
        assert any((kernel / rel).is_relative_to(p) for p in doomed), rel
    for rel in keep:
        assert not any((kernel / rel).is_relative_to(p) for p in doomed), rel


def test_mmdebstrap_call_customises_inside_hooks(tmp_path):
    argv = mmdebstrap_argv(("openssh-server", "nvme-cli"), KERNEL, tmp_path / "mods", tmp_path / "over",
                           tmp_path / "rootfs.tar")
    assert argv[:3] == ["mmdebstrap", "--variant=minbase", "--include=openssh-server,nvme-cli"]
    hooks = [a.split("=", 1)[1] for a in argv if a.startswith("--customize-hook=")]
    assert 'chroot "$1" depmod -a 6.1.0-57-amd64' in hooks
    assert any("ssh_host_*" in h for h in hooks), "the image must not carry shared SSH host keys"
    assert argv[-3:] == ["bookworm", str(tmp_path / "rootfs.tar"), "deb http://deb.debian.org/debian bookworm main"]


def _read_newc(data: bytes) -> dict[str, tuple[int, bytes]]:
    """name -> (mode, content) from a newc archive."""
    entries, pos = {}, 0
    while True:
        header = data[pos:pos + 110]
        assert header[:6] == b"070701"
        fields = [int(header[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        if name == "TRAILER!!!":
            return entries
        entries[name] = (mode, data[pos:pos + size])
        pos += size
        pos += -pos % 4


def test_tar_becomes_newc_cpio_with_modes_links_and_devices(tmp_path):
    tar_path = tmp_path / "root.tar"
    with tarfile.open(tar_path, "w") as archive:
        def add(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, **extra):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.size = kind, mode, len(data)
            for key, value in extra.items():
                setattr(info, key, value)
            archive.addfile(info, io.BytesIO(data) if data else None)
        add("./", tarfile.DIRTYPE, mode=0o755)
        add("./etc", tarfile.DIRTYPE, mode=0o755)
        add("./etc/shadow", data=b"root:*:1::::::\n", mode=0o640, gid=42)
        add("./etc/shadow-hard", tarfile.LNKTYPE, linkname="./etc/shadow")
        add("./init", tarfile.SYMTYPE, linkname="/lib/systemd/systemd", mode=0o777)
        add("./dev", tarfile.DIRTYPE, mode=0o755)
        add("./dev/null", tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=3)
    out = io.BytesIO()
    writer = CpioWriter(out)
    tar_to_cpio(tar_path, writer)
    writer.close()
    entries = _read_newc(out.getvalue())
    assert entries["etc/shadow"] == (stat.S_IFREG | 0o640, b"root:*:1::::::\n")
    assert entries["etc/shadow-hard"][1] == b"root:*:1::::::\n"
    assert entries["init"] == (stat.S_IFLNK | 0o777, b"/lib/systemd/systemd")
    assert stat.S_ISCHR(entries["dev/null"][0]) and stat.S_ISDIR(entries["etc"][0])


def test_newc_header_is_what_cpio_reads(tmp_path):
    """GNU cpio (the reference reader, when installed) lists what CpioWriter wrote."""
    out = io.BytesIO()
    writer = CpioWriter(out)
    writer.add("hello", stat.S_IFREG | 0o600, b"world\n")
    writer.close()
    assert len(newc_header(ino=1, mode=0, uid=0, gid=0, nlink=1, mtime=0, size=0, rdev_major=0, rdev_minor=0,
                           name="ab")) % 4 == 0
    try:
        listing = subprocess.run(["cpio", "-it", "--quiet"], input=out.getvalue(), capture_output=True)
    except FileNotFoundError:
        assert _read_newc(out.getvalue())["hello"][1] == b"world\n"
        return
    assert listing.stdout.decode().split() == ["hello"]


def test_missing_host_programs_are_named_with_the_install_command():
    from fxctl.lab import hosttools

    tools = {"fxctl-no-such-program": "fxctl-no-such-package", "sh": "dash"}
    missing = hosttools.find_missing(tools)
    assert missing.programs == ("fxctl-no-such-program",)
    with pytest.raises(FxError) as info:
        hosttools.require(tools, install=False, progress=lambda _m: None)
    assert "fxctl-no-such-program" in info.value.message
    assert "apt-get install -y fxctl-no-such-package" in info.value.hint
