#!/usr/bin/env python3
"""Benchmark: how fast hostile values are refused (a script that prints figures, not a test).

    .venv/bin/python tests/bench/bench_parse.py [-n 20]

The values of ``tests/unit/test_config_validation.py`` (Unicode digits, 5000-digit numbers,
``1e400``, a CPU set of 10^17 CPUs ...) given to ``parse_size`` and the LXD limit
normaliser: the slowest refusal of each, median of ``-n`` runs. Target < 100 ms each
(the unit tests check that they are refused; the speed is measured here, where a busy
machine makes a figure late instead of a test red).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "unit"))

TARGET = 0.1


def refusal_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            fn()
        except ValueError:
            pass
        else:
            raise SystemExit(f"{fn} was accepted: the unit tests say it must be refused")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    from backends.errors import InvalidInput
    from backends.lxd.limits import SPECS, normalise
    from backends.units import parse_size
    from test_config_validation import HOSTILE_LIMITS, HOSTILE_SIZES

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=20, help="runs of each value")
    args = p.parse_args()

    def limit(key, text):
        spec = next(s for s in SPECS if s.key == key)
        try:
            normalise(spec, text)
        except InvalidInput as e:
            raise ValueError(str(e)) from e

    rows = [(f"parse_size {t[:20]!r}", refusal_seconds(lambda t=t: parse_size(t), args.n))
            for t in HOSTILE_SIZES]
    rows += [(f"limit {k} {t[:20]!r}", refusal_seconds(lambda k=k, t=t: limit(k, t), args.n))
             for k, t in HOSTILE_LIMITS]
    worst = max(s for _, s in rows)
    print(f"{'value':44} {'refused in':>12}")
    for what, seconds in rows:
        print(f"{what:44} {seconds * 1000:>9.3f} ms")
    print(f"{'slowest':44} {worst * 1000:>9.3f} ms  (target < {TARGET * 1000:.0f} ms: "
          f"{'met' if worst < TARGET else 'MISSED'})")
    return 0 if worst < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
