#!/usr/bin/env python3
"""Benchmark: the file panel's first listing of a directory against the CLI on the same
directory (a script that prints figures, not a timed test).

    .venv/bin/python tests/bench/bench_files.py [--repeats 5] [--root DIR]

Launches a busybox container on lxd1 ('local', unix socket) and on the Incus daemon
('inc1', HTTPS), then, per remote and directory (``/`` and ``/etc``), prints medians of:

* corral: from ``f`` on the container's row (Pilot, 160x45) to the path shown, to the
  names shown (one GET) and to every entry's details shown (a HEAD each);
* ``lxc exec C -- ls -la DIR`` and ``lxc file pull -r C/DIR`` (the CLI a user would try).

Target: the panel's full listing within 2 x the faster CLI figure. With --root, uses a lab
started with `python tests/lab.py up --root DIR` (and leaves it); otherwise starts and
stops its own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import add_root_option, lab_up  # noqa: E402

DIRS = ("/", "/etc")


def cli_times(daemon, name: str, path: str, repeats: int) -> tuple[float, float]:
    """Medians of `exec ls -la` and `file pull -r` of ``path`` (seconds)."""
    ls, pull = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        daemon.cli("exec", name, "--", "ls", "-la", path)
        ls.append(time.perf_counter() - t0)
        if path != "/":  # pulling / would copy /proc and /sys
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                daemon.cli("file", "pull", "-r", f"{name}{path}", tmp)
                pull.append(time.perf_counter() - t0)
    return statistics.median(ls), statistics.median(pull) if pull else float("nan")


async def panel_times(env, cfg: Path, targets: dict[str, str], repeats: int):
    """{(remote, path): [(path shown, names shown, details shown), ...]} in seconds."""
    from textual import events

    from tui.app import make_app
    from tui.screens.files import FilesScreen
    from tui.widgets.instance_table import InstanceTable

    out: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    app = make_app(cfg, env=env, remote_names=list(targets))
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.main_screen.query_one(InstanceTable)
        while not all(any(r.remote == rem and r.name == n for r in table.refs.values())
                      for rem, n in targets.items()) or not all(
                          app.inventory.statuses[r].state.value == "connected"
                          for r in targets):
            await asyncio.sleep(0.05)
        await pilot.pause(1)
        for remote, name in targets.items():
            for path in DIRS:
                for _ in range(repeats):
                    key = next(k for k, r in table.refs.items()
                               if r.remote == remote and r.name == name)
                    table.move_cursor(row=table.get_row_index(key))
                    table.focus()
                    await pilot.pause(0.2)
                    t0 = time.perf_counter()
                    app.post_message(events.Key("f", "f"))  # as the terminal posts it
                    shown = names = full = None
                    went = path == "/"
                    while full is None:
                        screen = app.screen
                        await asyncio.sleep(0.002)
                        if not (isinstance(screen, FilesScreen)
                                and screen.query("#files-status")):
                            continue
                        if not went:  # at "/": go to ``path`` as `g` does, timed from here
                            if not screen.entries:
                                continue
                            went = True
                            t0 = time.perf_counter()
                            screen.load(path)
                            continue
                        now = time.perf_counter() - t0
                        title = str(screen.query_one("#files-title").render())
                        status = str(screen.query_one("#files-status").render())
                        rows = screen.query_one("#files-table").row_count
                        if shown is None and title.endswith(f": {path}"):
                            shown = now
                        if shown is not None and names is None and screen.path == path \
                                and rows > (path != "/"):
                            names = now
                        if names is not None and "entries ·" in status \
                                and "details" not in status:
                            full = now
                    out.setdefault((remote, path), []).append((shown, names, full))
                    await pilot.press("escape")
                    await pilot.pause(0.1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    add_root_option(ap)
    args = ap.parse_args()
    with lab_up(args.root) as lab:
        name = f"bfiles-{uuid.uuid4().hex[:6]}"
        daemons = {"local": lab.lxd1, "inc1": lab.incus1}
        for d in daemons.values():
            d.cli("launch", "busybox", name)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = Path(tmp) / "config.toml"
                cfg.write_text("[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n"
                               "[qemu]\nenabled = false\n")
                panel = asyncio.run(panel_times(lab.env(), cfg, dict.fromkeys(daemons, name),
                                                args.repeats))
            print(f"{'remote':6} {'dir':5} {'path':>7} {'names':>7} {'details':>8}   "
                  f"{'ls -la':>7} {'pull -r':>8}   ratio (details / faster CLI)")
            for (remote, path), runs in panel.items():
                shown, names, full = (statistics.median(x) * 1000 for x in zip(*runs))
                ls, pull = (t * 1000 for t in cli_times(daemons[remote], name, path,
                                                        args.repeats))
                best = min(t for t in (ls, pull) if t == t)
                print(f"{remote:6} {path:5} {shown:5.0f}ms {names:5.0f}ms {full:6.0f}ms   "
                      f"{ls:5.0f}ms {pull:6.0f}ms   {full / best:.2f}")
        finally:
            for d in daemons.values():
                d.cli("delete", "--force", name, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
