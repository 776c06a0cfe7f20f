"""A test guest with a graphical screen: the same cloud kernel and busybox as
``qemu_guest.py``, booted through OVMF (UEFI), so the kernel's efifb driver puts the
screen in a true-colour framebuffer mode (1280x800x32 with QEMU's std VGA) and fbcon draws
tty1 in it. The cloud kernel has no VESA, bochs or simpledrm driver, so a BIOS boot stays
in VGA text mode: UEFI is what gives this kernel a framebuffer.

Its /init prints ``corral-guest ready`` and runs a shell on the serial console, as the
plain guest does, and also:

- reads lines typed on tty1 (the screen's keyboard) and prints each on the serial console
  as ``tty1: <line>``, so a test sees what arrived through the keyboard;
- writes a line on tty2, so that console exists and Ctrl+Alt+F2 can switch to it (Linux
  switches only to allocated consoles);
- ships ``/red.raw``: 200 rows of 1280 red BGRX pixels, so ``cat /red.raw > /dev/fb0``
  paints a known colour over the top of the screen.

The kernel command line :data:`CMDLINE` keeps kernel messages off the screen and hides the
blinking cursor, so the screen is still unless a test changes it.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from qemu_guest import CACHE_VERSION, _kernel_dir, cache_dir, kernel

DISPLAY_VERSION = 2
WIDTH, RED_ROWS = 1280, 200
CMDLINE = "console=ttyS0 vt.global_cursor_default=0 panic=-1"

INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox --install -s /bin
echo "corral-guest tty2" > /dev/tty2
(while read -r line; do echo "tty1: $line" > /dev/ttyS0; done) < /dev/tty1 > /dev/tty1 2>&1 &
echo "corral-guest ready"
exec setsid cttyhack sh
"""


def initrd() -> Path:
    target = cache_dir() / f"initrd-display-v{CACHE_VERSION}.{DISPLAY_VERSION}.gz"
    if target.exists():
        return target
    _kernel_dir()
    busybox = shutil.which("busybox") or "/bin/busybox"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "proc", "sys", "dev", "tmp"):
            (root / d).mkdir(parents=True)
        shutil.copy(busybox, root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        (root / "red.raw").write_bytes(b"\x00\x00\xff\x00" * WIDTH * RED_ROWS)
        (root / "init").write_text(INIT)
        os.chmod(root / "init", 0o755)
        listing = subprocess.run(["find", "."], cwd=root, capture_output=True,
                                 check=True).stdout
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=listing,
                              capture_output=True, check=True).stdout
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.write_bytes(gzip.compress(cpio))
        os.replace(partial, target)
    return target


def guest() -> tuple[Path, Path]:
    return kernel(), initrd()


if __name__ == "__main__":
    print(*guest())
