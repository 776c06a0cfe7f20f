"""A bootable Linux guest for QEMU tests, built offline from Debian packages: the cloud
kernel (vmlinuz) and a busybox initramfs whose /init prints a marker and runs a shell on
the serial console. Cached under ~/.cache/corral-test (override: CORRAL_TEST_CACHE).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox --install -s /bin
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


def kernel() -> Path:
    target = cache_dir() / "vmlinuz"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", kernel_package()], cwd=tmp, check=True,
                       capture_output=True)
        deb = next(Path(tmp).glob("*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp + "/x"], check=True)
        vmlinuz = next(Path(tmp, "x", "boot").glob("vmlinuz-*"))
        shutil.copyfile(vmlinuz, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)
    return target


def initrd() -> Path:
    target = cache_dir() / "initrd.gz"
    if target.exists():
        return target
    busybox = shutil.which("busybox") or "/bin/busybox"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "proc", "sys", "dev", "tmp"):
            (root / d).mkdir()
        shutil.copy(busybox, root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        (root / "init").write_text(INIT)
        os.chmod(root / "init", 0o755)
        listing = subprocess.run(["find", "."], cwd=root, capture_output=True,
                                 check=True).stdout
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=listing,
                              capture_output=True, check=True).stdout
        target.with_suffix(".tmp").write_bytes(gzip.compress(cpio))
        os.replace(target.with_suffix(".tmp"), target)
    return target


def guest() -> tuple[Path, Path]:
    return kernel(), initrd()


if __name__ == "__main__":
    print(*guest())
