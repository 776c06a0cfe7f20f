#!/usr/bin/env python3
"""Make docs/screenshot.svg (and -light.svg, and -console.svg with two console tabs open)
from a real lab: two LXD daemons and one Incus
daemon with a few containers. Needs root and the lab packages (scripts/setup-lab.sh).

    .venv/bin/python scripts/screenshot.py
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import lab as labmod  # noqa: E402

from tui.app import make_app  # noqa: E402
from tui.widgets.instance_table import InstanceTable  # noqa: E402


async def shoot(lab, theme: str, out: Path, console: Path | None = None) -> None:
    cfg = Path(tempfile.mkdtemp()) / "config.toml"
    cfg.write_text(f'[ui]\ntheme = "{theme}"\nmetrics_interval = 1\n')
    app = make_app(cfg, env=lab.env())
    async with app.run_test(size=(150, 32) if console is None else (150, 44)) as pilot:
        table = app.screen.query_one(InstanceTable)
        while table.row_count < 8:
            await asyncio.sleep(0.05)
        await pilot.pause(3.5)  # two usage samples, so CPU % shows
        for key, ref in table.refs.items():
            if ref.name == "web-1":
                table.move_cursor(row=table.get_row_index(key))
        await pilot.press("enter")
        await pilot.pause(1.5)
        app.save_screenshot(str(out))
        if console is None:
            return
        # the same screen with an exec shell open beside the table
        await pilot.press("enter")  # details off
        await pilot.press("e")
        await pilot.pause(2)
        await pilot.press(*"ls --color=always /; uptime", "enter")
        await pilot.pause(1)
        await pilot.press("ctrl+right_square_bracket")
        for key, ref in table.refs.items():
            if ref.name == "cache":
                table.move_cursor(row=table.get_row_index(key))
        await pilot.press("c")
        await pilot.pause(2)
        await pilot.press("enter")
        await pilot.press(*"echo hello from the console of cache", "enter")
        await pilot.pause(1)
        app.save_screenshot(str(console))


def main() -> None:
    # a timeout's SIGTERM must still stop the lab's daemons (the `with`/finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with labmod.Lab() as lab:
        for name in ("web-1", "web-2", "db"):
            lab.lxd1.cli("launch", "busybox", name)
        lab.lxd1.cli("init", "busybox", "builder")
        lab.lxd1.cli("snapshot", "db", "before-upgrade")
        lab.lxd1.cli("snapshot", "db", "nightly")
        for name in ("cache", "queue"):
            lab.lxd2.cli("launch", "busybox", name)
        lab.lxd2.cli("pause", "queue")
        lab.incus1.cli("launch", "busybox", "ci-runner")
        lab.incus1.cli("init", "busybox", "sandbox")
        lab.incus1.cli("init", "busybox", "vm-test", "--vm", check=False)
        docs = ROOT / "docs"
        asyncio.run(shoot(lab, "corral-dark", docs / "screenshot.svg"))
        asyncio.run(shoot(lab, "corral-light", docs / "screenshot-light.svg"))
        asyncio.run(shoot(lab, "corral-dark", docs / "screenshot-tall.svg",
                          console=docs / "screenshot-console.svg"))
        (docs / "screenshot-tall.svg").unlink(missing_ok=True)
        print("wrote docs/screenshot.svg, screenshot-light.svg and screenshot-console.svg")


if __name__ == "__main__":
    main()
