"""The file panel (`f`) against the lab's real LXD daemon: browse, push a file with `u`,
pull a directory with `p`, checked with `lxc file pull` and checksums."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from tui.app import make_app
from tui.screens.dialogs import InputDialog
from tui.screens.files import FilesScreen
from tui.screens.paths import complete
from tui.widgets.instance_table import InstanceTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import wait_for


def local_app(tmp_path, lab_env):
    """corral on the lab's 'local' remote only (lxd1), no LXC or QEMU."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n')
    return make_app(cfg, env=lab_env, remote_names=["local"])


async def open_files(pilot, app, name: str) -> FilesScreen:
    """Select the instance ``name`` once it is listed and open its files panel (f)."""
    table = app.main_screen.query_one(InstanceTable)
    await wait_for(pilot, lambda: any(r.name == name for r in table.refs.values()),
                   what=f"{name} listed")
    key = next(k for k, r in table.refs.items() if r.name == name)
    table.move_cursor(row=table.get_row_index(key))
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, FilesScreen), what="the files panel")
    return app.screen


def status(screen) -> str:
    return str(screen.query_one("#files-status").render())


async def _answer(pilot, app, value):
    await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), what="the dialog")
    box = app.screen.query_one("#dialog-input")
    box.value = value
    await pilot.pause()
    await pilot.press("enter")


async def test_files_panel_push_and_pull(lab, lab_env, tmp_path, unique):
    name = unique()
    lab.lxd1.cli("launch", "busybox", name)
    lab.lxd1.cli("exec", name, "--", "sh", "-c", "mkdir -p /srv/a/b && echo one > /srv/a/b/x")
    app = local_app(tmp_path, lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            screen = await open_files(pilot, app, name)
            await wait_for(pilot, lambda: "/srv" in screen.entries, what="the root listing")
            screen.load("/srv")
            await wait_for(pilot, lambda: "/srv/a" in screen.entries, what="/srv")
            # push a local file into /srv
            local = tmp_path / "payload.bin"
            local.write_bytes(os.urandom(1024 * 1024 + 3))
            os.chmod(local, 0o640)
            await pilot.press("u")
            await _answer(pilot, app, str(local))
            await wait_for(pilot, lambda: "done" in status(screen), what=lambda: status(screen))
            out = tmp_path / "check.bin"
            lab.lxd1.cli("file", "pull", f"{name}/srv/payload.bin", str(out))
            assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(
                local.read_bytes()).digest()
            assert screen.entries["/srv/payload.bin"].mode == 0o640
            # pull the directory /srv/a into a local folder
            dest = tmp_path / "dest"
            dest.mkdir()
            table_f = screen.query_one("#files-table")
            table_f.move_cursor(row=table_f.get_row_index("/srv/a"))
            await pilot.press("p")
            await _answer(pilot, app, str(dest))
            await wait_for(pilot, lambda: (dest / "a" / "b" / "x").exists()
                           and "done" in status(screen), what=lambda: status(screen))
            assert (dest / "a" / "b" / "x").read_text() == "one\n"
            # the same pull again is refused in words, nothing overwritten
            await pilot.press("p")
            await _answer(pilot, app, str(dest))
            await wait_for(pilot, lambda: "exists already" in status(screen),
                           what=lambda: status(screen))
            # a path that is not there
            screen.load("/no/such/dir")
            await wait_for(pilot, lambda: "does not exist" in status(screen),
                           what=lambda: status(screen))
    finally:
        lab.lxd1.cli("delete", "--force", name)


def test_tab_completes_local_paths(tmp_path):
    (tmp_path / "backup-2026.tar.gz").write_text("")
    (tmp_path / "backups").mkdir()
    (tmp_path / "kernel").write_text("")
    assert complete(str(tmp_path / "k")) == str(tmp_path / "kernel")
    assert complete(str(tmp_path / "b")) == str(tmp_path / "backup")
    assert complete(str(tmp_path / "backups")) == str(tmp_path / "backups") + "/"
    assert complete(str(tmp_path / "zzz")) == str(tmp_path / "zzz")


async def test_edit_pushes_back_and_cancel_stops_a_copy(lab, lab_env, tmp_path, unique,
                                                       monkeypatch):
    """`e` with $EDITOR (a script here; the terminal hand-over itself, App.suspend, needs a
    real terminal and is replaced by a no-op) and `x` during a big push."""
    import contextlib

    name = unique()
    lab.lxd1.cli("launch", "busybox", name)
    lab.lxd1.cli("exec", name, "--", "sh", "-c",
                 "echo 'port=80' > /etc/app.conf && chmod 640 /etc/app.conf && "
                 "chown 7:8 /etc/app.conf")
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i s/80/8080/ \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    app = local_app(tmp_path, lab_env)
    monkeypatch.setattr(app, "suspend", contextlib.nullcontext)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            screen = await open_files(pilot, app, name)
            screen.load("/etc", select="/etc/app.conf")
            await wait_for(pilot, lambda: screen.selected is not None
                           and screen.selected.path == "/etc/app.conf", what="app.conf")
            await pilot.press("e")
            await wait_for(pilot, lambda: "saved" in status(screen), what=lambda: status(screen))
            out = lab.lxd1.cli("exec", name, "--", "sh", "-c",
                               "cat /etc/app.conf; ls -ln /etc/app.conf").stdout
            assert "port=8080" in out and "-rw-r-----" in out and " 7 " in out, out
            # a big push, cancelled with x
            big = tmp_path / "big.bin"
            with open(big, "wb") as f:
                f.truncate(600 * 1024 * 1024)
            await pilot.press("u")
            await _answer(pilot, app, str(big))
            await wait_for(pilot, lambda: "Pushing" in status(screen), what="the push")
            await pilot.press("x")
            await wait_for(pilot, lambda: "cancelled" in status(screen),
                           what=lambda: status(screen))
            assert not (screen.transfer and screen.transfer.is_running)
    finally:
        lab.lxd1.cli("delete", "--force", name)
