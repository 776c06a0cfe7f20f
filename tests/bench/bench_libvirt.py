#!/usr/bin/env python3
"""Benchmark: corral's listing of a libvirt remote with N defined domains against
``virsh list --all`` on the same daemon (a script that prints figures, not a test).

    .venv/bin/python tests/bench/bench_libvirt.py [-n 200] [--running 2] [--repeats 5]

Starts a private libvirtd (``tests/lab_libvirt.py``, as root), defines N domains of the
test guest (``--running`` of them started, TCG), then prints medians, each from a fresh
process:

* ``virsh -c URI list --all``;
* the backend alone: a Python process that imports corral's libvirt backend, connects and
  lists (``list_instances``: one ``getAllDomainStats`` and each domain's XML), timed from
  its start to the list;
* the real ``corral`` command in a tmux pane until its table shows all N rows fresh
  (``benchlib.time_first_table``; a config with the lab as its only remote).

Target: corral's first full table of 200 domains within 1 s. The ratios to ``virsh list
--all`` are for information: virsh is a C program that prints names only (about 20 ms
here), corral a Python program that starts a terminal UI and reads each domain's state,
memory, vCPUs and definition (200 domains: about 0.25 s for the backend alone, 0.9 s to
the full table, on the machine this was written on).
"""

from __future__ import annotations

import argparse
import atexit
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

import lab_libvirt  # noqa: E402
import qemu_guest  # noqa: E402
from benchlib import TMUX, time_first_table  # noqa: E402

LIST = """
import asyncio, sys, time
t0 = time.perf_counter()
from backends import get_backend
from backends.models import Remote
async def main():
    b = get_backend(Remote(name="lab", kind="libvirt", address=sys.argv[1]), timeout=30)
    await b.connect()
    n = len(await b.list_instances())
    print(n, time.perf_counter() - t0)
    await b.close()
asyncio.run(main())
"""


def median_of(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.0f} ms   (all: " \
           f"{', '.join(f'{t * 1000:.0f}' for t in times)})"


def virsh_times(uri: str, n: int, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run(["virsh", "-c", uri, "list", "--all", "--name"],
                              capture_output=True, text=True, check=True)
        out.append(time.perf_counter() - t0)
        assert len([line for line in done.stdout.splitlines() if line.strip()]) == n
    return out


def backend_times(uri: str, n: int, repeats: int) -> list[float]:
    """Seconds from starting a Python process to its ``list_instances`` of ``n``."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", LIST, uri], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        out.append(time.perf_counter() - t0)
        count = int(done.stdout.split()[0])
        assert count == n, done.stdout
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200, help="defined domains (default 200)")
    parser.add_argument("--running", type=int, default=2, help="of them started (default 2)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reason = lab_libvirt.unavailable_reason()
    if reason:
        print(f"the private libvirt cannot run here: {reason}")
        return 1
    lab_libvirt.sweep_stale()
    lab = lab_libvirt.LibvirtLab()
    atexit.register(subprocess.run, [*TMUX, "kill-server"], capture_output=True, check=False)
    try:
        lab.start()
        kernel, initrd = qemu_guest.guest()
        t0 = time.perf_counter()
        names = [f"bench-{i:04d}-{uuid.uuid4().hex[:4]}" for i in range(args.n)]
        for name in names:
            lab_libvirt.define(lab, lab_libvirt.guest_xml(name, kernel, initrd))
        for name in names[:args.running]:
            subprocess.run(["virsh", "-c", lab.unix_uri, "start", name], check=True,
                           capture_output=True)
        print(f"{args.n} domains defined ({args.running} running) in "
              f"{time.perf_counter() - t0:.1f} s on {lab.unix_uri}")

        virsh_times(lab.unix_uri, args.n, 1)  # warm: the page cache, Python's bytecode
        backend_times(lab.unix_uri, args.n, 1)
        virsh = virsh_times(lab.unix_uri, args.n, args.repeats)
        backend = backend_times(lab.unix_uri, args.n, args.repeats)
        with tempfile.TemporaryDirectory(prefix="corral-bench-libvirt-") as tmp:
            work = Path(tmp)
            cfg = work / "config.toml"
            cfg.write_text(
                '[remotes]\nhide = ["local", "incus-local", "libvirt", "libvirt-session"]\n'
                f'[qemu]\npath = "{work / "qemu"}"\n[lxc]\nenabled = false\n'
                f'[[remote]]\nname = "lab"\nkind = "libvirt"\nuri = "{lab.unix_uri}"\n')
            env = {**os.environ, "HOME": str(work), "XDG_CONFIG_HOME": str(work / "config"),
                   "XDG_RUNTIME_DIR": str(work / "run"), "LXD_SOCKET": str(work / "none"),
                   "INCUS_SOCKET": str(work / "none"), "TMPDIR": str(work)}
            first = time_first_table(cfg, env, args.n, repeats=args.repeats, timeout=120)
        print(f"virsh list --all (fresh process):                       {median_of(virsh)}")
        print(f"corral backend, connect + list_instances (fresh python): {median_of(backend)}")
        print(f"corral first full table (fresh process, cold, tmux):      {median_of(first)}")
        print(f"corral first full table: {statistics.median(first) * 1000:.0f} ms  "
              f"(target <= 1000 ms for 200 domains)")
        ratio = statistics.median(first) / statistics.median(virsh)
        print(f"ratio corral first table / virsh list --all: {ratio:.1f}  (for information)")
        ratio = statistics.median(backend) / statistics.median(virsh)
        print(f"ratio corral backend listing / virsh list --all: {ratio:.1f}  (for information)")
    finally:
        lab.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
