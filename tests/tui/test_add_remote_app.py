"""`+` adds a remote from inside corral and `-` removes it, against the lab's real LXD and
Incus daemons (Pilot, the same app the `corral` command builds)."""

from __future__ import annotations

import sys
from pathlib import Path

from backends.models import ConnectionState
from tui.app import make_app
from tui.screens.add_remote import AddRemoteDialog
from tui.screens.dialogs import ConfirmDialog
from tui.widgets.remote_list import RemoteList

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import wait_for


def _config(tmp_path):
    cfg = tmp_path / "corral" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n')
    return cfg


async def _fill(pilot, app, name, address, token):
    await pilot.press("plus")
    await wait_for(pilot, lambda: isinstance(app.screen, AddRemoteDialog), what="dialog")
    dialog = app.screen
    dialog.query_one("#remote-name").value = name
    dialog.query_one("#remote-address").value = address
    dialog.query_one("#remote-token").value = token
    await pilot.pause()
    dialog.query_one("#remote-name").focus()
    await pilot.press("enter")


async def test_plus_adds_with_a_token_and_minus_removes(lab, lab_env, tmp_path):
    cfg = _config(tmp_path)
    app = make_app(cfg, env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.main_screen is not None)
        await _fill(pilot, app, "added", "", lab.incus1.trust_token("ui-token"))
        await wait_for(pilot, lambda: "added" in app.inventory.statuses
                       and app.inventory.statuses["added"].state is ConnectionState.CONNECTED,
                       what="the added remote to connect")
        assert (tmp_path / "corral" / "remotes.toml").is_file()
        assert app.inventory.statuses["added"].server.server == "incus"
        # the remotes pane shows it; - there removes it after asking
        remotes = app.main_screen.query_one(RemoteList)
        await pilot.press("1")
        remotes.move_cursor(row=remotes.get_row_index("added"))
        await pilot.press("minus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        assert "Remove remote added?" in app.screen.title_text
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: "added" not in app.inventory.statuses, what="removal")
        await wait_for(pilot, lambda: "added" not in {
            k.value for k in remotes.rows}, what="its row to go")
        assert "[[remote]]" not in (tmp_path / "corral" / "remotes.toml").read_text()
    # a new corral does not show it
    app = make_app(cfg, env=lab_env)
    assert "added" not in {r.name for r in app.remotes}


async def test_wrong_token_says_so_and_adds_nothing(lab, lab_env, tmp_path):
    cfg = _config(tmp_path)
    app = make_app(cfg, env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.main_screen is not None)
        # a token of lxd2, dialled at lxd1: the certificate does not match
        await _fill(pilot, app, "wrong", lab.lxd1.https_address, lab.lxd2.trust_token("x"))
        await wait_for(pilot, lambda: any("not the one the token names" in str(n.message)
                                          for n in app._notifications), what="the refusal")
        assert "wrong" not in app.inventory.statuses
        assert not (tmp_path / "corral" / "remotes.toml").exists()


async def test_a_remote_corral_did_not_add_is_not_removed(lab, lab_env, tmp_path):
    cfg = _config(tmp_path)
    app = make_app(cfg, env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: "lab2" in app.inventory.statuses)
        remotes = app.main_screen.query_one(RemoteList)
        await pilot.press("1")
        await wait_for(pilot, lambda: remotes.row_count > 0)
        remotes.move_cursor(row=remotes.get_row_index("lab2"))
        await pilot.press("minus")
        await wait_for(pilot, lambda: any("was not added in corral" in str(n.message)
                                          for n in app._notifications), what="the refusal")
        assert "lab2" in app.inventory.statuses


async def test_tofu_shows_the_fingerprint_to_accept(lab, lab_env, tmp_path):
    """No token: the certificate's fingerprint is shown; accepted, the remote is added
    (corral's certificate was trusted on the server by hand beforehand)."""
    from backends.trust import ensure_client_certificate

    cfg = _config(tmp_path)
    crt, _key = ensure_client_certificate(cfg.parent)
    lab.lxd2.cli("config", "trust", "add", str(crt))
    app = make_app(cfg, env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.main_screen is not None)
        await _fill(pilot, app, "tofu", lab.lxd2.https_address, "")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="accept?")
        pretty = ":".join(lab.lxd2.fingerprint[i:i + 2] for i in range(0, 64, 2))
        assert pretty in app.screen.message
        await pilot.pause(0.3)
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: "tofu" in app.inventory.statuses
                       and app.inventory.statuses["tofu"].state is ConnectionState.CONNECTED,
                       what="the accepted remote to connect")
