#!/usr/bin/env python3
"""Benchmark: corral's inventory against the lab daemons (a script that prints figures,
not a timed test).

    .venv/bin/python tests/bench/bench_inventory.py [-n 300] [--running 30] [--root DIR]

Creates N busybox containers split over lxd1 (unix socket, 'local') and lxd2 (HTTPS,
'lab2'), some of them running, then prints:

1. time to the first full table (names + status of every instance) in corral, against
   `lxc list --format csv` over the same remotes (run one after the other, as a user would);
2. time from an external `lxc stop` to the row changing (measured from the LXD lifecycle
   event's own timestamp, and from the moment the `lxc stop` command returned);
3. corral's idle CPU over 30 s, running for real in tmux with a 160x45 terminal.

Targets: (1) <= 0.5x lxc list, (2) <= 250 ms, (3) <= 1 % of a core.
With --root, uses a lab started with `python tests/lab.py up --root DIR` (and leaves it);
otherwise starts and stops a private lab.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import (  # noqa: E402
    add_root_option,
    cpu_percent,
    lab_up,
    print_first_table,
    time_first_table,
    time_lxc_list,
)


def populate(lab, n: int, running: int) -> list[tuple[str, str]]:
    """Create n containers (half on each LXD daemon); return (remote, name) of running ones."""
    targets = [("local", lab.lxd1), ("lab2", lab.lxd2)]
    have = {r: set(d.cli("list", "--format", "csv", "-c", "n").stdout.split())
            for r, d in targets}
    made = []
    t0 = time.monotonic()
    for i in range(n):
        remote, daemon = targets[i % 2]
        name = f"bench-{i:04d}"
        made.append((remote, daemon, name))
        if name not in have[remote]:
            daemon.cli("init", "busybox", name)
    runners = []
    for remote, daemon, name in made[:running]:
        daemon.cli("start", name, check=False)
        runners.append((remote, name))
    print(f"populated {n} containers ({running} running) in {time.monotonic() - t0:.1f} s")
    return runners


async def time_corral(env: dict[str, str], n: int, runners, lab, repeats: int = 5):
    from backends.models import EventKind
    from tui.app import make_app
    from tui.widgets.instance_table import InstanceTable

    cfg = Path(tempfile.mkdtemp()) / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 10\n[remotes]\nhide = ["inc1", "incus-local"]\n')
    first_table = await asyncio.to_thread(time_first_table, cfg, env, n, repeats)

    # event -> screen
    latencies_event, latencies_cmd = [], []
    app = make_app(cfg, env=env)
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.screen.query_one(InstanceTable)
        inv = app.screen.inventory
        while table.row_count < n:
            await asyncio.sleep(0.01)
        await pilot.pause(1.0)
        stamps: dict[str, datetime] = {}
        original = inv.events.apply

        def spy(name, event):
            if event.kind is EventKind.LIFECYCLE and event.ref and event.timestamp:
                stamps.setdefault(event.ref.name, event.timestamp)
            original(name, event)

        inv.events.apply = spy  # type: ignore[method-assign]
        daemons = {"local": lab.lxd1, "lab2": lab.lxd2}
        for remote, name in runners[:10]:
            key = next(k for k, r in table.refs.items() if r.remote == remote and r.name == name)
            stamps.pop(name, None)
            proc = await asyncio.create_subprocess_exec(
                "lxc", "stop", "--force", f"{remote}:{name}" if remote != "local" else name,
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cmd_done = None
            while True:
                if cmd_done is None and proc.returncode is not None:
                    cmd_done = time.perf_counter()
                if str(table.get_row(key)[3]) == "stopped":
                    seen_wall = datetime.now(timezone.utc)
                    seen = time.perf_counter()
                    break
                try:
                    await asyncio.wait_for(proc.wait(), 0.001)
                except asyncio.TimeoutError:
                    pass
            await proc.wait()
            if cmd_done is None:
                cmd_done = time.perf_counter()
            if name in stamps:
                latencies_event.append((seen_wall - stamps[name]).total_seconds())
            latencies_cmd.append(seen - cmd_done)
            await asyncio.to_thread(daemons[remote].cli, "start", name)
        await pilot.pause(0.5)
    return first_table, latencies_event, latencies_cmd


def idle_cpu(env: dict[str, str], n: int, seconds: float = 30.0) -> float:
    session = f"corral-bench-{os.getpid()}"
    cfg = Path(tempfile.mkdtemp()) / "config.toml"
    cfg.write_text('[remotes]\nhide = ["inc1", "incus-local"]\n')
    pidfile = cfg.with_name("pid")
    cmd = (f"echo $$ > {pidfile}; exec env CORRAL_CONFIG_FILE={cfg} "
           f"{ROOT / '.venv/bin/python'} -m tui")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "45",
                    "bash", "-c", cmd], env=env, check=True)
    try:
        time.sleep(8)  # connect, list, first samples
        return cpu_percent(int(pidfile.read_text()), seconds)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def main() -> int:
    # a timeout's SIGTERM must still stop the lab's daemons (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=300, help="containers to create (default 300)")
    parser.add_argument("--running", type=int, default=30, help="of which running (default 30)")
    add_root_option(parser)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    args = parser.parse_args()

    with lab_up(args.root) as lab:
        env = lab.env()
        runners = populate(lab, args.n, args.running)
        lxc_list = time_lxc_list(env, ["local:", "lab2:"])
        first, ev_lat, cmd_lat = asyncio.run(time_corral(env, args.n, runners, lab))
        cpu = idle_cpu(env, args.n, args.idle_seconds)
        print()
        print(f"instances: {args.n} on 2 LXD remotes (unix + HTTPS), {args.running} running")
        print_first_table(first, lxc_list, "lxc list --format csv, both remotes (median of 5): ")
        if ev_lat:
            print(f"event timestamp -> row changed: median {statistics.median(ev_lat)*1000:.0f} ms,"
                  f" max {max(ev_lat)*1000:.0f} ms over {len(ev_lat)} stops (target <= 250 ms)")
        print(f"`lxc stop` returned -> row changed: median "
              f"{statistics.median(cmd_lat)*1000:.0f} ms, max {max(cmd_lat)*1000:.0f} ms "
              f"(negative: the row changed before the command returned)")
        print(f"idle CPU over {args.idle_seconds:.0f} s in tmux: {cpu:.2f} % of a core"
              f" (target <= 1 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
