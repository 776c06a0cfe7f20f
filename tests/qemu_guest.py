"""Bootable Linux guests for QEMU tests, built offline from Debian packages: the cloud
kernel (vmlinuz) and a busybox initramfs.

- :func:`guest`: BIOS boot; /init loads the virtio balloon, net and block drivers
  (virtio_pci, virtio_balloon, virtio_net, virtio_blk and their dependencies, taken from
  the same kernel package), prints a marker and runs a shell on the serial console.
- :func:`display_guest`: the same kernel booted through OVMF (UEFI) with
  :data:`DISPLAY_CMDLINE`, so the kernel's efifb driver puts the screen in a true-colour
  framebuffer mode (1280x800x32 with QEMU's std VGA) and fbcon draws tty1 in it. The cloud
  kernel has no VESA, bochs or simpledrm driver, so a BIOS boot stays in VGA text mode:
  UEFI is what gives this kernel a framebuffer. Its /init prints the same marker and runs
  the same shell, and also

  - reads lines typed on tty1 (the screen's keyboard) and prints each on the serial
    console as ``tty1: <line>``, so a test sees what arrived through the keyboard;
  - writes a line on tty2, so that console exists and Ctrl+Alt+F2 can switch to it (Linux
    switches only to allocated consoles);
  - ships ``/red.raw``: 200 rows of 1280 red BGRX pixels, so ``cat /red.raw > /dev/fb0``
    paints a known colour over the top of the screen.

  :data:`DISPLAY_CMDLINE` keeps kernel messages off the screen and hides the blinking
  cursor, so the screen is still unless a test changes it.

Cached under ~/.cache/corral-test (override: CORRAL_TEST_CACHE). The kernel package is
taken from /var/cache/apt/archives, where scripts/setup-lab.sh fetches it before any test
runs (so a package mirror's hiccup cannot fail a test); only a run without that set-up
falls back on `apt-get download`. The kernel and its modules are cached together so they
always match.
"""

from __future__ import annotations

import gzip
import lzma
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

# Bump when what the cached kernel directory or initramfs holds changes: the old cache
# is then ignored and rebuilt. v2: virtio balloon modules in the initramfs; v3: virtio
# net and block too (a NIC and a disk the guest can use: their usage figures move).
CACHE_VERSION = 3

# Modules the guest loads (their dependencies are added, and loaded first).
MODULES = ("virtio_pci", "virtio_balloon", "virtio_net", "virtio_blk")

INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox --install -s /bin
for m in {modules}; do
    insmod /lib/modules/$m.ko || echo "corral-guest: insmod $m failed"
done
echo "corral-guest ready"
exec setsid cttyhack sh
"""

# The display guest's initramfs has a version of its own (its cache name has both).
DISPLAY_VERSION = 2
WIDTH, RED_ROWS = 1280, 200
DISPLAY_CMDLINE = "console=ttyS0 vt.global_cursor_default=0 panic=-1"

DISPLAY_INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox --install -s /bin
echo "corral-guest tty2" > /dev/tty2
(while read -r line; do echo "tty1: $line" > /dev/ttyS0; done) < /dev/tty1 > /dev/tty1 2>&1 &
echo "corral-guest ready"
exec setsid cttyhack sh
"""


def cache_dir() -> Path:
    path = Path(os.environ.get("CORRAL_TEST_CACHE") or Path.home() / ".cache" / "corral-test")
    path.mkdir(parents=True, exist_ok=True)
    return path


def kernel_package() -> str:
    out = subprocess.run(["apt-cache", "depends", "linux-image-cloud-amd64"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[1]
    raise RuntimeError("no kernel package behind linux-image-cloud-amd64 (apt-get update?)")


def _fetch_deb(into: str) -> Path:
    """The cloud kernel .deb: from apt's archive cache if it is there, else `apt-get
    download`; without network, any cloud kernel already in apt's archive cache."""
    archives = Path("/var/cache/apt/archives")
    try:
        package = kernel_package()
    except (OSError, subprocess.CalledProcessError, RuntimeError):
        package = None
    if package:
        cached = sorted(archives.glob(f"{package}_*.deb"))
        if cached:
            return cached[-1]
        try:
            subprocess.run(["apt-get", "download", package], cwd=into, capture_output=True,
                           check=True)
        except (OSError, subprocess.CalledProcessError):
            pass  # offline: fall back on what apt has cached
        debs = list(Path(into).glob("*.deb"))
        if debs:
            return debs[0]
    cached = sorted(archives.glob("linux-image-*-cloud-amd64_*.deb"))
    if cached:
        return cached[-1]
    raise RuntimeError(f"cannot get the cloud kernel package {package or ''} "
                       "(apt-get update? network?)")


def modinfo(data: bytes) -> dict[str, list[str]]:
    """The key=value strings of an ELF64 little-endian kernel module's .modinfo section
    (what `modinfo` prints; kmod is not necessarily installed)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 little-endian module")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    names = sections[shstrndx][4]
    out: dict[str, list[str]] = {}
    for name, _type, _flags, _addr, offset, size in sections:
        if data[names + name: data.index(b"\0", names + name)] == b".modinfo":
            for item in data[offset: offset + size].split(b"\0"):
                key, eq, value = item.decode(errors="replace").partition("=")
                if eq:
                    out.setdefault(key, []).append(value)
    return out


def _read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)  # busybox insmod may not read compressed modules
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko"):
        return data
    raise RuntimeError(f"cannot decompress kernel module {path}")


def _modules(tree: Path, wanted: tuple[str, ...], into: Path) -> list[str]:
    """Copy `wanted` and what they depend on from the extracted package into `into`
    (decompressed, as NAME.ko); returns the names in load order (dependencies first)."""
    index: dict[str, Path] = {}
    for path in (tree / "lib" / "modules").rglob("*.ko*"):
        index[path.name.split(".ko")[0].replace("-", "_")] = path
    builtin = set()  # modules.builtin lists what is compiled in, e.g. kernel/.../x.ko
    for listing in (tree / "lib" / "modules").glob("*/modules.builtin"):
        builtin |= {Path(line).name.split(".ko")[0].replace("-", "_")
                    for line in listing.read_text().split()}
    order: list[str] = []

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in order or name in chain or name in builtin:
            return  # loaded already, or built into the kernel: nothing to load
        if name not in index:
            raise RuntimeError(f"kernel module {name} is neither in the kernel package "
                               "nor built in")
        data = _read_module(index[name])
        for dep in filter(None, ",".join(modinfo(data).get("depends", [])).split(",")):
            visit(dep.replace("-", "_"), chain + (name,))
        (into / f"{name}.ko").write_bytes(data)
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order


def _kernel_dir() -> Path:
    """vmlinuz, the guest's modules (modules/*.ko) and their load order (modules/order),
    all from one kernel package."""
    target = cache_dir() / f"kernel-v{CACHE_VERSION}"
    if (target / "vmlinuz").exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        deb = _fetch_deb(tmp)
        tree = Path(tmp, "x")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
        build = Path(tmp, "out")
        (build / "modules").mkdir(parents=True)
        order = _modules(tree, MODULES, build / "modules")
        (build / "modules" / "order").write_text(" ".join(order) + "\n")
        shutil.copyfile(next((tree / "boot").glob("vmlinuz-*")), build / "vmlinuz")
        (build / "package").write_text(deb.name + "\n")
        try:
            os.rename(build, target)  # atomic; a concurrent build may have won
        except OSError:
            if not (target / "vmlinuz").exists():
                raise
    return target


def kernel() -> Path:
    return _kernel_dir() / "vmlinuz"


def _busybox_initrd(target: Path, init: str, files: dict[str, bytes]) -> Path:
    """Write to `target` (atomically) a gzipped newc cpio with busybox as /bin/busybox and
    /bin/sh, `init` as /init and `files` (path in the image -> content)."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "proc", "sys", "dev", "tmp"):
            (root / d).mkdir(parents=True)
        shutil.copy(busybox, root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        (root / "init").write_text(init)
        os.chmod(root / "init", 0o755)
        listing = subprocess.run(["find", "."], cwd=root, capture_output=True,
                                 check=True).stdout
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=listing,
                              capture_output=True, check=True).stdout
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.write_bytes(gzip.compress(cpio))
        os.replace(partial, target)
    return target


def initrd() -> Path:
    target = cache_dir() / f"initrd-v{CACHE_VERSION}.gz"
    if target.exists():
        return target
    modules = _kernel_dir() / "modules"
    order = (modules / "order").read_text().split()
    files = {f"lib/modules/{name}.ko": (modules / f"{name}.ko").read_bytes()
             for name in order}
    return _busybox_initrd(target, INIT.format(modules=" ".join(order)), files)


def display_initrd() -> Path:
    target = cache_dir() / f"initrd-display-v{CACHE_VERSION}.{DISPLAY_VERSION}.gz"
    if target.exists():
        return target
    _kernel_dir()
    red = b"\x00\x00\xff\x00" * WIDTH * RED_ROWS
    return _busybox_initrd(target, DISPLAY_INIT, {"red.raw": red})


def guest() -> tuple[Path, Path]:
    return kernel(), initrd()


def display_guest() -> tuple[Path, Path]:
    """The UEFI framebuffer guest; boot it with ``firmware="uefi"`` and
    ``cmdline=DISPLAY_CMDLINE``."""
    return kernel(), display_initrd()


if __name__ == "__main__":
    print(*guest())
    print(*display_guest())


async def wait_serial(backend, name: str, needle: str, timeout: float = 60) -> None:
    """Wait until ``needle`` is in the serial log of the backend's VM ``name``."""
    import asyncio
    import time

    log = backend.vms.run_dir(name) / "serial.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text(errors="replace"):
            return
        await asyncio.sleep(0.2)
    tail = log.read_text(errors="replace")[-500:] if log.exists() else "(no log)"
    raise AssertionError(f"{needle!r} not on the serial console: {tail}")
