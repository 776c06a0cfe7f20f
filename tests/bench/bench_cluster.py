#!/usr/bin/env python3
"""Benchmark: corral on a real 3-member LXD cluster (a script that prints figures, not a
timed test).

    .venv/bin/python tests/bench/bench_cluster.py [--per-member 200] [--running 30] [--root DIR]

Creates PER_MEMBER busybox containers on each of m1..m3 (RUNNING of them started), then
prints:

1. time to the first full table (every instance with its status) in corral, against
   `lxc list clu: --format csv` (default columns) on the same cluster;
2. a member going offline (SIGKILL of m3's daemon) until its row in the remotes pane says
   offline — and, for comparison, until the daemon's own `lxc cluster list` says OFFLINE
   (its heartbeat and ``cluster.offline_threshold`` bound that);
3. the member corral talks to dying (SIGKILL of m1) until the remote is connected again
   through another member with every row listed.

Targets: (1) <= 0.5x lxc list, (2) <= 5 s.
With --root, uses (and leaves) a cluster from `python tests/lab.py up --cluster lxd --root
DIR`: the instances made by an earlier run are kept there, so a second run skips the slow
part. Otherwise a private cluster is formed and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import lab_cluster  # noqa: E402
from benchlib import (  # noqa: E402
    add_root_option,
    lab_up,
    print_first_table,
    time_first_table,
    time_lxc_list,
)

REMOTE = lab_cluster.CLUSTER_REMOTE


def populate(cluster, per_member: int, running: int) -> None:
    have = set(cluster.locations())
    t0 = time.monotonic()
    jobs = {}
    for m in cluster.members:
        names = [f"b-{m.name}-{i:03d}" for i in range(per_member)]
        todo = [n for n in names if n not in have]

        def run(m=m, todo=todo):
            for n in todo:
                m.cli("init", "busybox", n, "--target", m.name)
        jobs[m.name] = run
    lab_cluster.Lab._raise(lab_cluster._run_parallel(jobs))
    started = [f"b-m{1 + i % 3}-{i // 3:03d}" for i in range(running)]
    status = dict(line.split(",") for line in cluster.cli(
        "list", "--format", "csv", "-c", "ns").stdout.split())
    todo = [n for n in started if status.get(n) != "RUNNING"]
    if todo:
        cluster.cli("start", *todo, timeout=900)
    print(f"{per_member * 3} containers ({running} running) ready in "
          f"{time.monotonic() - t0:.1f} s")


def _config() -> Path:
    cfg = Path(tempfile.mkdtemp()) / "config.toml"
    # 'local' is member 1 again, through its unix socket: only the cluster remote here
    cfg.write_text('[ui]\nmetrics_interval = 10\n[remotes]\nhide = ["local", "incus-local"]\n')
    return cfg


async def _until(predicate, what: str, timeout: float = 120.0, step: float = 0.005) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise SystemExit(f"bench: {what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(step)


def _member_state(app, member: str) -> str:
    from tui.widgets.member_rows import member_key
    from tui.widgets.remote_list import RemoteList

    try:
        row = app.main_screen.query_one(RemoteList).get_row(member_key(REMOTE, member))
    except Exception:  # noqa: BLE001 - not shown yet
        return ""
    return str(row[2]).strip()


def _cli_state(cluster, member: str) -> str:
    r = cluster.cli("cluster", "list", "--format", "json", check=False, timeout=30)
    try:
        return next(m["status"] for m in json.loads(r.stdout) if m["server_name"] == member)
    except (ValueError, StopIteration):
        return ""


async def time_offline_and_failover(cluster, env, n: int, own_cluster: bool
                                    ) -> dict[str, float]:
    from tui.app import make_app
    from tui.widgets.instance_table import InstanceTable

    figures: dict[str, float] = {}
    app = make_app(_config(), env=env)
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.screen.query_one(InstanceTable)
        await _until(lambda: table.row_count >= n and _member_state(app, "m3") == "online",
                     "the full table with m3 online")
        await pilot.pause(1.0)
        m3 = cluster.member("m3")
        t0 = time.perf_counter()
        m3.kill()
        await _until(lambda: _member_state(app, "m3") == "offline", "m3 offline on screen")
        figures["offline on screen"] = time.perf_counter() - t0
        while await asyncio.to_thread(_cli_state, cluster, "m3") != "Offline":
            await asyncio.sleep(0.5)
            if time.perf_counter() - t0 > 120:
                break
        figures["offline in `lxc cluster list`"] = time.perf_counter() - t0
        await asyncio.to_thread(m3.start)
        t1 = time.perf_counter()
        await _until(lambda: _member_state(app, "m3") == "online", "m3 online on screen")
        figures["online again on screen after the daemon's start"] = time.perf_counter() - t1

        m1 = cluster.member("m1")
        status = app.inventory.statuses[REMOTE]
        t0 = time.perf_counter()
        m1.kill()
        await _until(lambda: bool(status.server and "reached through" in status.server.note
                                  and status.state.value == "connected" and status.listed
                                  and table.row_count >= n), "the failover")
        figures["failover: connected through another member, table listed"] = \
            time.perf_counter() - t0
        await _until(lambda: _member_state(app, "m1") == "offline", "m1 offline on screen")
        figures["failover: dead member offline on screen"] = time.perf_counter() - t0
        await asyncio.to_thread(m1.start)
        if not own_cluster:
            cluster.write_records()  # the restarted members' pids, for the next run
        await pilot.pause(0.5)
    return figures


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-member", type=int, default=200)
    parser.add_argument("--running", type=int, default=30)
    add_root_option(parser, "use a cluster started with `lab.py up --cluster lxd --root`")
    args = parser.parse_args()
    own = args.root is None
    with lab_up(args.root, cluster="lxd") as cluster:
        env = cluster.env()
        n = args.per_member * 3
        populate(cluster, args.per_member, args.running)
        lxc_list = time_lxc_list(env, [f"{REMOTE}:"])
        first = time_first_table(_config(), env, n)
        print(f"lxc list: {lxc_list:.2f} s; corral first table: "
              f"{', '.join(f'{t:.2f}' for t in first)} s", flush=True)
        figures = asyncio.run(time_offline_and_failover(cluster, env, n, own))
        print()
        print(f"instances: {n} on a 3-member LXD cluster (HTTPS), {args.running} running")
        print_first_table(first, lxc_list, f"lxc list {REMOTE}: --format csv (median of 5):     ")
        for what, seconds in figures.items():
            print(f"{what}: {seconds:.2f} s")
        print("(target: a member offline on screen <= 5 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
