"""The text gate against real daemons: file names a container's root wrote into its /tmp
(an OSC 52 clipboard write, a BEL, an 8-bit CSI, a right-to-left override, and a symlink
whose target carries one) are shown in the files panel with their controls made visible,
and nothing Textual writes to the terminal holds them raw. A real LXC container in a
private lxcpath, and a container of the lab's LXD (tests/test_text_gate.py's fake remote
covers every other kind of outside text)."""

from __future__ import annotations

import sys
from pathlib import Path

from backend_checks import busybox_container, lxc

from tui.app import make_app
from tui.format import printable
from tui.screens.dialogs import InputDialog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_files_app import open_files
from test_real_app import wait_for
from test_text_gate import Terminal, settle

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
"""Sets the clipboard to ``rm -rf ~`` (base64) in a terminal that lets it."""
NAMES = (f"osc{OSC52}", "bel\x07ring", "csi\x9b31mred", "rtl\u202etxt.exe")
LINK, TARGET = "link", f"/tmp/to{OSC52}"
RAW = ("\x1b]52", "\x07", "\x9b", "\u202e")
"""What must never be written raw (Rich drops a BEL itself; the OSC's start stays)."""


def commands() -> list[list[str]]:
    """The commands that make the names in the container's /tmp (busybox's applets)."""
    return [["touch", *(f"/tmp/{n}" for n in NAMES)], ["ln", "-s", TARGET, f"/tmp/{LINK}"]]


async def browse_tmp(app, name: str) -> None:
    """Open the files panel on ``name`` with ``f``, go to /tmp with ``g``, and check what
    the terminal was given."""
    terminal = Terminal(app)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await open_files(pilot, app, name)
        await wait_for(pilot, lambda: "/tmp" in screen.entries, what="the root listing")
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), what="go to")
        app.screen.query_one("#dialog-input").value = "/tmp"
        await pilot.pause()
        await pilot.press("enter")
        wanted = {f"/tmp/{n}" for n in (*NAMES, LINK)}
        await wait_for(pilot, lambda: wanted <= set(screen.entries),
                       what=lambda: f"/tmp listed with the names ({sorted(screen.entries)})")
        assert screen.entries[f"/tmp/{LINK}"].target == TARGET  # kept exact underneath
        await settle(pilot, 10)
        for out in terminal.output:  # what Textual would write: none of it raw
            for raw in RAW:
                at = out.find(raw)
                assert at < 0, f"{raw!r} written raw: {out[max(at - 40, 0):at + 40]!r}"
        shown = [printable(n) for n in NAMES]
        assert shown == ["osc␛]52;c;cm0gLXJmIH4K␇", "bel␇ring", "csi�31mred",
                         "rtl�txt.exe"]
        terminal.check("the files panel on /tmp", *shown, printable(TARGET))


async def test_lxc_file_names_reach_the_terminal_gated(lxc_path, hermetic_env, tmp_path):
    busybox_container(lxc_path, "gate")
    lxc(lxc_path, "lxc-start", "-n", "gate")
    for command in commands():
        lxc(lxc_path, "lxc-attach", "-n", "gate", "--", "/bin/busybox", *command)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[ui]\nmetrics_interval = 60\n[lxc]\npaths = ["{lxc_path}"]\n'
                   '[qemu]\nenabled = false\n')
    await browse_tmp(make_app(cfg, env=hermetic_env, remote_names=["lxc"]), "gate")


async def test_lxd_file_names_reach_the_terminal_gated(lab, lab_env, unique, tmp_path):
    name = unique()
    lab.lxd1.cli("launch", "busybox", name)
    try:
        for command in commands():
            lab.lxd1.cli("exec", name, "--", *command)
        cfg = tmp_path / "config.toml"
        cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n'
                       '[qemu]\nenabled = false\n')
        await browse_tmp(make_app(cfg, env=lab_env, remote_names=["local"]), name)
    finally:
        lab.lxd1.cli("delete", "--force", name)
