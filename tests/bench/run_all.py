#!/usr/bin/env python3
"""Every benchmark, one after the other, and one table of their figures (a script that
prints figures, not a test).

    .venv/bin/python tests/bench/run_all.py [--quick] [--only NAME ...] [--log DIR]

Each benchmark runs as its own process, as documented in its own docstring; those that
need daemons start a private lab (or cluster) of their own and stop it, so no benchmark's
containers change another one's counts. ``--quick`` gives each the small sizes below (a
few minutes each instead of up to half an hour); without it every benchmark runs with its
defaults. The table has, per benchmark, each line of its summary that names a target or
a ratio (its own words, figures beside their references from the same run), or its last
lines when it names none, and how long it took; a benchmark that failed says so and its
full output stays in ``--log``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

BENCHES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bench_parse.py", ("-n", "5")),
    ("bench_pump.py", ()),
    ("bench_terminal.py", ("--mb", "5")),
    ("bench_console_e2e.py", ("--mb", "5", "--rounds", "2")),
    ("bench_import.py", ("--size", "256", "-n", "2")),
    ("bench_screen.py", ("-n", "20")),
    ("bench_files.py", ("--repeats", "3")),
    ("bench_libvirt.py", ("-n", "40", "--running", "1", "--repeats", "3")),
    ("bench_console_latency.py", ("-n", "50")),
    ("bench_inventory.py", ("-n", "90", "--idle-seconds", "15")),
    ("bench_views.py", ("-n", "60", "--objects", "20", "--rounds", "3")),
    ("bench_cluster.py", ("--per-member", "30", "--running", "6")),
    ("bench_startup.py", ("-n", "90", "--vms", "4", "--runs", "3", "--idle-seconds", "20",
                          "--cluster-per-member", "10")),
)
"""Every benchmark, with its ``--quick`` arguments."""

TIMEOUT = 3600.0
"""The longest one benchmark may run."""


def summary(output: str) -> list[str]:
    """The lines of a benchmark's output that carry its verdicts: each line naming a
    target or a ratio, and when it heads a table (columns apart by two spaces or more)
    the table's rows after it, up to a blank line."""
    lines = [line.rstrip() for line in output.splitlines()]
    picked: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "target" in line or "ratio" in line:
            picked.append(line)
            if re.search(r"\S {2,}\S", line):
                while i + 1 < len(lines) and lines[i + 1].strip() \
                        and "target" not in lines[i + 1] and "ratio" not in lines[i + 1]:
                    i += 1
                    picked.append(lines[i])
        i += 1
    return picked or [line for line in lines if line.strip()][-3:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the small sizes")
    parser.add_argument("--only", nargs="*", default=(), help="these benchmarks (bench_files…)")
    parser.add_argument("--log", type=Path, default=None, help="keep every output here")
    args = parser.parse_args()
    log = args.log or Path(tempfile.mkdtemp(prefix="corral-bench-all-"))
    log.mkdir(parents=True, exist_ok=True)
    chosen = [(name, extra) for name, extra in BENCHES
              if not args.only or name.removesuffix(".py") in
              {o.removesuffix(".py") for o in args.only}]
    rows: list[tuple[str, str, list[str]]] = []
    for name, extra in chosen:
        argv = [sys.executable, str(HERE / name), *(extra if args.quick else ())]
        print(f"running {name} {' '.join(argv[2:])}", flush=True)
        t0 = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                                  timeout=TIMEOUT, check=False)
            output, failed = done.stdout + done.stderr, done.returncode != 0
        except subprocess.TimeoutExpired as e:
            output = f"{e.stdout or ''}{e.stderr or ''}\n(timed out after {TIMEOUT:g} s)"
            failed = True
        seconds = time.monotonic() - t0
        (log / f"{name}.log").write_text(output if isinstance(output, str) else str(output))
        state = f"FAILED after {seconds:.0f} s" if failed else f"{seconds:.0f} s"
        rows.append((name.removesuffix(".py"), state,
                     summary(output)[-4:] if failed else summary(output)))
    print()
    width = max((len(n) for n, _, _ in rows), default=10)
    print(f"{'benchmark':{width}}  {'took':>16}  figures (each benchmark's own words)")
    print(f"{'-' * width}  {'-' * 16}  {'-' * 60}")
    for name, state, lines in rows:
        for i, line in enumerate(lines or ["(no output)"]):
            print(f"{name if i == 0 else '':{width}}  {state if i == 0 else '':>16}  {line}")
    print(f"\nfull outputs: {log}")
    return 1 if any(state.startswith("FAILED") for _, state, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
