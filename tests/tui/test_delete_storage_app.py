"""Deleting an instance whose remote can also remove the storage it keeps
(``Capability.DELETE_STORAGE``; the fake backend plays libvirt's volumes): the delete dialog
lists that storage under a checkbox that is off, so a plain confirmation keeps it; a tick
deletes the instance and exactly what was listed. An instance with nothing to offer gets
the plain confirmation."""

# ruff: noqa: F811 - pytest fixtures imported from test_fake_app are parameters here
from __future__ import annotations

from textual.widgets import Checkbox

from tui.screens.dialogs import ConfirmDialog, DeleteDialog

from .test_fake_app import fake_env, press, running, select, settle, table_rows  # noqa: F401

DISKS = ["/var/lib/libvirt/images/web2.qcow2", "/var/lib/libvirt/images/web2-data.qcow2"]


async def test_the_storage_is_listed_and_kept_unless_ticked(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        alpha = backends["alpha"]
        alpha.storage["web2"] = list(DISKS)
        select(app, "alpha:web2")
        await press(pilot, app, "d")
        dialog = app.screen
        assert isinstance(dialog, DeleteDialog)
        assert "alpha:web2" in dialog.title_text
        listed = str(dialog.query_one("#delete-storage-list").render())
        assert all(disk in listed for disk in DISKS)
        assert dialog.query_one("#delete-storage", Checkbox).value is False
        await pilot.press("enter")  # focus starts on Cancel
        await settle(pilot, app)
        assert "alpha:web2" in table_rows(app)
        assert not any(c[0].startswith("delete") for c in alpha.calls)

        # confirmed without the tick: the instance goes, its storage stays
        await press(pilot, app, "d")
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert "alpha:web2" not in table_rows(app)
        assert alpha.calls[-1] == ("delete", "web2", {"force": False})
        assert alpha.storage["web2"] == DISKS


async def test_a_tick_deletes_the_instance_with_what_was_listed(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        alpha = backends["alpha"]
        alpha.storage["web1"] = DISKS[:1]
        select(app, "alpha:web1")
        await press(pilot, app, "d")
        dialog = app.screen
        assert isinstance(dialog, DeleteDialog)
        assert "stopped by force" in dialog.message  # it is running
        await pilot.click("#delete-storage")
        await settle(pilot, app)
        assert dialog.query_one("#delete-storage", Checkbox).value is True
        assert "with its storage" in str(dialog.query_one("#confirm").label)
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert "alpha:web1" not in table_rows(app)
        assert alpha.calls[-2:] == [("delete", "web1", {"force": True}),
                                    ("delete_storage", "web1", {"storage": DISKS[:1]})]
        assert "web1" not in alpha.storage


async def test_nothing_to_offer_is_the_plain_confirmation(fake_env):
    async with running(fake_env) as (app, pilot):
        select(app, "alpha:web2")
        await press(pilot, app, "d")
        assert isinstance(app.screen, ConfirmDialog)
        assert not isinstance(app.screen, DeleteDialog)
        assert not app.screen.query("#delete-storage")


async def test_what_is_kept_is_said_with_why(fake_env):
    """Storage the remote leaves out (another instance's disk is built on it) is not in
    the list, and the dialog says why in the remote's words; with nothing left to offer,
    the plain confirmation says it."""
    backends = fake_env[3]
    base = "/var/lib/libvirt/images/base.qcow2"
    why = "base.qcow2 is the backing file of web3.qcow2, which is a disk of web3 (vda)"
    async with running(fake_env) as (app, pilot):
        alpha = backends["alpha"]
        alpha.storage["web2"] = DISKS[:1]
        alpha.kept_storage["web2"] = [(base, why)]
        select(app, "alpha:web2")
        await press(pilot, app, "d")
        dialog = app.screen
        assert isinstance(dialog, DeleteDialog)
        assert f"Kept: {why}." in dialog.message
        listed = str(dialog.query_one("#delete-storage-list").render())
        assert DISKS[0] in listed and base not in listed
        await pilot.press("escape")
        await settle(pilot, app)

        alpha.storage["web2"] = []
        await press(pilot, app, "d")
        assert isinstance(app.screen, ConfirmDialog)
        assert not isinstance(app.screen, DeleteDialog)
        assert f"Kept: {why}." in app.screen.message


async def test_a_refused_delete_is_said_and_deletes_nothing(fake_env):
    """The remote checks again when deleting: a volume used meanwhile refuses the delete,
    and the refusal reaches the user in words."""
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        alpha = backends["alpha"]
        alpha.storage["web2"] = list(DISKS)
        select(app, "alpha:web2")
        await press(pilot, app, "d")
        assert isinstance(app.screen, DeleteDialog)
        alpha.storage["web2"] = DISKS[1:]  # the first became another's since the listing
        await pilot.click("#delete-storage")
        await settle(pilot, app)
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert "alpha:web2" in table_rows(app)
        assert not any(c[0].startswith("delete") for c in alpha.calls)
        said = [n.message for n in app._notifications]
        assert any(DISKS[0] in m and "nothing was deleted" in m for m in said), said
