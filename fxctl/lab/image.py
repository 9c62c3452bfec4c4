"""The lab image (vmlinux + initramfs) in the cache, built once per recipe key."""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fxctl.errors import FxError
from fxctl.lab import hosttools
from fxctl.lab.guest_files import write_overlay
from fxctl.lab.kernel import check_host_suite, download_kernel, trim_modules, vmlinux_from_bzimage
from fxctl.lab.paths import cache_root
from fxctl.lab.recipe import Recipe, current_recipe
from fxctl.lab.rootfs import mmdebstrap_argv, pack_initramfs, run_mmdebstrap

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LabImage:
    key: str
    folder: Path

    @property
    def vmlinux(self) -> Path:
        return self.folder / "vmlinux"

    @property
    def initramfs(self) -> Path:
        return self.folder / "initramfs.cpio.lz4"

    @property
    def manifest(self) -> Path:
        return self.folder / "manifest.json"

    def is_complete(self) -> bool:
        return self.vmlinux.is_file() and self.initramfs.is_file() and self.manifest.is_file()

    def describe(self) -> dict:
        return json.loads(self.manifest.read_text()) if self.manifest.is_file() else {}


def image_for(recipe: Recipe) -> LabImage:
    key = recipe.key()
    return LabImage(key=key, folder=cache_root() / key)


def ensure_image(*, force: bool = False, install_deps: bool = False, progress: Progress) -> LabImage:
    """The cached image for the current recipe, building it first when absent (or when forced)."""
    hosttools.require(hosttools.BUILD_TOOLS, install=install_deps, progress=progress)
    check_host_suite()
    recipe = _current_recipe(install_deps, progress)
    image = image_for(recipe)
    cache_root().mkdir(parents=True, exist_ok=True)
    with _build_lock(image):
        if image.is_complete() and not force:
            progress(f"image {image.key}: cached in {image.folder}")
            return image
        _build(recipe, image, progress)
    return image


def _current_recipe(install_deps: bool, progress: Progress) -> Recipe:
    """The recipe; with --install-deps (root), refresh apt's package lists once if they lack the kernel."""
    try:
        return current_recipe()
    except FxError:
        if not (install_deps and hosttools.can_install()):
            raise
    progress("apt-get update (the package lists do not name a bookworm kernel)")
    hosttools.run_apt_update()
    return current_recipe()


@contextmanager
def _build_lock(image: LabImage):
    with open(cache_root() / f"{image.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(recipe: Recipe, image: LabImage, progress: Progress) -> None:
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"{image.key}.build-", dir=cache_root()))
    try:
        staged = scratch / "image"
        staged.mkdir()
        progress(f"kernel: downloading {recipe.kernel.package} {recipe.kernel.version}")
        kernel_root = download_kernel(recipe.kernel, scratch / "deb")
        bzimage = kernel_root / "boot" / f"vmlinuz-{recipe.kernel.abi}"
        (staged / "vmlinux").write_bytes(vmlinux_from_bzimage(bzimage.read_bytes()))
        modules = kernel_root / "lib" / "modules" / recipe.kernel.abi
        trim_modules(modules)
        overlay = scratch / "overlay"
        write_overlay(overlay)
        progress(f"rootfs: mmdebstrap {len(recipe.packages)} packages (about a minute)")
        rootfs_tar = scratch / "rootfs.tar"
        run_mmdebstrap(mmdebstrap_argv(recipe.packages, recipe.kernel, modules, overlay, rootfs_tar),
                       scratch / "mmdebstrap.log")
        progress("initramfs: packing rootfs as lz4 cpio")
        pack_initramfs(rootfs_tar, staged / "initramfs.cpio.lz4")
        _write_manifest(staged, recipe, time.monotonic() - started)
        if image.folder.exists():
            shutil.rmtree(image.folder)
        staged.rename(image.folder)
        progress(f"image {image.key}: built in {time.monotonic() - started:.0f} s")
        _prune_other_images(image, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _prune_other_images(image: LabImage, progress: Progress) -> None:
    """Drop images of older recipes (a running guest holds its kernel and initramfs in its own RAM)."""
    for folder in cache_root().iterdir():
        if folder.is_dir() and folder.name != image.key and ".build-" not in folder.name \
                and (folder / "manifest.json").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            (cache_root() / f"{folder.name}.lock").unlink(missing_ok=True)
            progress(f"removed the image of an older recipe: {folder.name}")


def _write_manifest(folder: Path, recipe: Recipe, seconds: float) -> None:
    manifest = {
        "key": recipe.key(), "kernel": recipe.kernel.package, "kernel_version": recipe.kernel.version,
        "abi": recipe.kernel.abi, "packages": list(recipe.packages), "build_seconds": round(seconds, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sizes": {p.name: p.stat().st_size for p in folder.iterdir()},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
