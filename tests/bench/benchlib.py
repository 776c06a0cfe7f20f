"""What the lab benchmarks share: the lab they run against (their own, or one left up by
``tests/lab.py up --root DIR``), CPU time of a process, and corral's time to its first
full instance table set against ``lxc list``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: lab, lab_cluster


def add_root_option(parser, help: str = "use a lab started with `lab.py up --root`") -> None:
    parser.add_argument("--root", type=Path, help=help)


@contextlib.contextmanager
def lab_up(root: Path | None, cluster: str | None = None):
    """The lab (or, with ``cluster``, that kind of cluster) recorded under ``root``, or with
    no ``root`` a private one started here and stopped on the way out."""
    if cluster is None:
        import lab as labmod

        make, records = labmod.Lab, labmod.Lab.from_records
    else:
        import lab_cluster

        make, records = (lambda: lab_cluster.Cluster(cluster)), lab_cluster.Cluster.from_records
    own = root is None
    lab = make() if own else records(root)
    if own:
        lab.start()
    try:
        yield lab
    finally:
        if own:
            lab.stop()


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU time the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_percent(pid: int, seconds: float) -> float:
    """The share of one core the process ``pid`` uses over the next ``seconds``."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0) * 100


def time_lxc_list(env: dict[str, str], remotes: list[str], repeats: int = 5) -> float:
    """Median seconds of `lxc list REMOTE --format csv` over ``remotes``, one after the
    other (as a user would)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for remote in remotes:
            subprocess.run(["lxc", "list", remote, "--format", "csv"], env=env, check=True,
                           capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def time_first_table(cfg: Path, env, n: int, repeats: int = 5) -> list[float]:
    """Seconds from corral's start (config ``cfg``) to a table of ``n`` instances."""
    from tui.app import make_app
    from tui.widgets.instance_table import InstanceTable

    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        app = make_app(cfg, env=env)
        async with app.run_test(size=(160, 45)) as pilot:
            while True:
                table = app.screen.query_one(InstanceTable) if app.screen.is_mounted else None
                if table is not None and table.row_count >= n:
                    break
                await asyncio.sleep(0.002)
            out.append(time.perf_counter() - t0)
            await pilot.pause(0.2)
    return out


def print_first_table(first: list[float], lxc_list: float, lxc_label: str) -> None:
    """corral's first full table (median and all runs) against `lxc list` and their ratio;
    ``lxc_label`` says which `lxc list` (padded to line up)."""
    corral_first = statistics.median(first)
    print(f"first full table, corral (median of {len(first)}): {corral_first*1000:7.0f} ms"
          f"   (all: {', '.join(f'{t*1000:.0f}' for t in first)})")
    print(f"{lxc_label}{lxc_list*1000:7.0f} ms")
    print(f"ratio corral / lxc list: {corral_first / lxc_list:.2f}  (target <= 0.5)")
