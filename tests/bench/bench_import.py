#!/usr/bin/env python3
"""Benchmark: importing a foreign VM's disk (a script that prints figures, not a test).

    .venv/bin/python tests/bench/bench_import.py [--size 1024] [-n 3]

A raw disk of ``--size`` MiB (half random data, half zeros, as a used guest disk), turned
into a stream-optimised VMDK and a VDI, each described by a VMware-style OVF; the VMDK
also packed into an OVA. For each, the median of ``-n`` runs of:

- **bare**: ``qemu-img convert -f <fmt> -O qcow2`` of the same disk file, nothing else;
- **corral**: ``plan_import`` (gate, ``qemu-img info`` and ``measure``) + ``import_vm``
  (the conversion with ``-p`` progress, the definition) into a fresh VM directory;
- for the OVA, corral's figure includes unpacking it through the archive reader and
  checking its manifest.

Speeds are MiB of virtual disk per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import import_fixtures as fx  # noqa: E402

from backends.local import qemu_remote  # noqa: E402
from backends.qemu import QEMUBackend  # noqa: E402

MiB = 1 << 20


def make_disk(path: Path, size_mib: int) -> None:
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for i in range(size_mib):
            f.write(block if i % 2 == 0 else b"\0" * MiB)


def bare(src: Path, fmt: str, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["qemu-img", "convert", "-f", fmt, "-O", "qcow2", str(src), str(out)],
                   check=True)
    took = time.perf_counter() - started
    out.unlink()
    return took


async def corral(source: Path, work: Path, n: int) -> float:
    os.environ["XDG_RUNTIME_DIR"] = str(work / "run")
    qemu = QEMUBackend(qemu_remote(str(work / f"vms{n}")), timeout=10)
    await qemu.connect()
    try:
        started = time.perf_counter()
        plan = await qemu.plan_import(str(source))
        await qemu.import_vm(plan, "bench", accel="tcg")
        took = time.perf_counter() - started
    finally:
        await qemu.close()
    shutil.rmtree(work / f"vms{n}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="disk size in MiB")
    parser.add_argument("-n", type=int, default=3, help="runs of each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR", "/var/tmp")) as tmp:
        work = Path(tmp)
        raw = work / "disk.raw"
        make_disk(raw, args.size)
        rows = []
        for fmt, label in (("vmdk", "VMDK stream-optimised"), ("vdi", "VDI")):
            pkg = work / f"pkg-{fmt}"
            pkg.mkdir()
            disk = fx.convert(raw, pkg / f"disk.{fmt}", fmt)
            descriptor = fx.vmware_ovf("bench", [(disk.name, 0, 0)], efi=False)
            if fmt == "vdi":
                descriptor = descriptor.replace(fx.VMDK_FORMAT.encode(),
                                                b"http://www.virtualbox.org/vdi")
            (pkg / "bench.ovf").write_bytes(descriptor)
            b = [bare(disk, fmt, work / "bare.qcow2") for _ in range(args.n)]
            c = [asyncio.run(corral(pkg, work, i)) for i in range(args.n)]
            rows.append((f"{label} (folder)", statistics.median(b), statistics.median(c)))
            if fmt == "vmdk":
                ova = fx.make_ova(work / "bench.ova", [("bench.ovf", descriptor),
                                                       (disk.name, disk)])
                c = [asyncio.run(corral(ova, work, i)) for i in range(args.n)]
                rows.append((f"{label} (OVA, unpacked + manifest)", statistics.median(b),
                             statistics.median(c)))
        print(f"disk: {args.size} MiB virtual, half data; median of {args.n} runs")
        print(f"{'source':50} {'bare qemu-img':>16} {'corral import':>16} {'ratio':>7}")
        for label, b, c in rows:
            print(f"{label:50} {b:6.2f} s {args.size / b:5.0f} MiB/s "
                  f"{c:6.2f} s {args.size / c:5.0f} MiB/s {c / b:6.2f}x")


if __name__ == "__main__":
    main()
