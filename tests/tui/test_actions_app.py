"""The actions menu (a) and the operations view (w) against the real LXD daemons:
backup and restore across remotes, clone, copy and move, publish, the remote's images,
password, NICs, rename and description — each checked with the real lxc CLI."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, OptionList

from tui.app import make_app
from tui.views.pane import ResourcePane

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_checks import busybox_container, lxc
from test_real_app import rows, select, wait_for, write_config
from test_wizard_app import notes


def screen_name(app) -> str:
    return app.screen.__class__.__name__


async def action(pilot, app, ref: str, key: str) -> None:
    """Open the actions menu on ``ref`` and pick ``key``."""
    select(app, ref)
    await pilot.press("a")
    await wait_for(pilot, lambda: screen_name(app) == "ActionsMenu", what="actions menu")
    options = app.screen.query_one(OptionList)
    options.focus()
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    assert key in ids, f"{key} not offered for {ref}: {ids}"
    for _ in range(ids.index(key)):
        await pilot.press("down")
    await pilot.press("enter")


async def answer(pilot, app, text: str, dialog="InputDialog") -> None:
    await wait_for(pilot, lambda: screen_name(app) == dialog, what=dialog)
    box = app.screen.query_one("#dialog-input", Input)
    box.focus()
    await pilot.press("end", "ctrl+u", *text, "enter")


async def pick(pilot, app, key: str) -> None:
    await wait_for(pilot, lambda: screen_name(app) == "ChoiceDialog", what="a choice")
    options = app.screen.query_one(OptionList)
    options.focus()
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    for _ in range(ids.index(key)):
        await pilot.press("down")
    await pilot.press("enter")


def names(daemon) -> set[str]:
    return set(daemon.cli("list", "-c", "n", "--format", "csv").stdout.split())


async def set_password(pilot, app, ref: str, password: str) -> None:
    """The password action on ``ref``: the new password typed twice, then Enter."""
    await action(pilot, app, ref, "password")
    await wait_for(pilot, lambda: screen_name(app) == "PasswordDialog", what="pw")
    app.screen.query_one("#pw-1").focus()
    await pilot.press(*password)
    app.screen.query_one("#pw-2").focus()
    await pilot.press(*password, "enter")


async def test_lifecycle_actions_on_lxd(lab, lab_env, unique, tmp_path):
    a, b = unique("a"), unique("b")
    lab.lxd1.cli("launch", "busybox", a)
    lab.lxd1.cli("snapshot", a, "before")
    lab.lxd2.cli("launch", "busybox", b)
    made = {lab.lxd1: {a}, lab.lxd2: {b}}
    alias = unique("img")
    bridge = f"cbr{random.randint(100, 999)}"
    net = f"10.{random.randint(100, 250)}.{random.randint(0, 250)}"
    lab.lxd1.cli("network", "create", bridge, f"ipv4.address={net}.1/24",
                 "ipv6.address=none", "ipv4.nat=false")
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: {f"local:{a}", f"lab2:{b}"} <= set(rows(app)),
                           what="both instances")

            # backup on lxd1 ...
            backup = tmp_path / "a-backup.tar.gz"
            await action(pilot, app, f"local:{a}", "export")
            await answer(pilot, app, str(backup))
            await pick(pilot, app, "with")
            await wait_for(pilot, lambda: any("Exported" in n for n in notes(app)),
                           timeout=60, what=f"exported ({notes(app)})")
            assert backup.stat().st_size > 0
            # ... restored on lxd2 (with its snapshot)
            restored = unique("r")
            made[lab.lxd2].add(restored)
            await action(pilot, app, f"lab2:{b}", "import")
            await answer(pilot, app, str(backup))
            await answer(pilot, app, restored)
            await wait_for(pilot, lambda: restored in names(lab.lxd2), timeout=60,
                           what=f"restored on lxd2 ({notes(app)})")
            assert "before" in lab.lxd2.cli("info", restored).stdout

            # clone on the same remote
            clone = unique("k")
            made[lab.lxd1].add(clone)
            await action(pilot, app, f"local:{a}", "clone")
            await answer(pilot, app, clone)
            await pick(pilot, app, "bare")
            await wait_for(pilot, lambda: clone in names(lab.lxd1), timeout=60,
                           what=lambda: f"clone ({notes(app)})")
            assert "before" not in lab.lxd1.cli("info", clone).stdout  # without snapshots

            # copy to lxd2: it is running, corral asks to stop it first
            copy = unique("c")
            made[lab.lxd2].add(copy)
            await action(pilot, app, f"local:{a}", "copy")
            await pick(pilot, app, "lab2")
            await answer(pilot, app, copy)
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog",
                           what="stop first?")
            await pilot.pause(0.3)
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: copy in names(lab.lxd2), timeout=90,
                           what=f"copied ({notes(app)})")
            assert a in names(lab.lxd1)
            # it was stopped for the copy: corral offers to start it again (not now: it is
            # published stopped below; tests/tui/test_small_things_lxd.py accepts)
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog"
                           and "again" in app.screen.title_text, what="start it again?")
            await pilot.pause(0.3)
            await pilot.click("#cancel")
            await wait_for(pilot, lambda: screen_name(app) == "MainScreen", what="closed")

            # move the clone to lxd2
            await wait_for(pilot, lambda: f"local:{clone}" in rows(app), what="clone row")
            moved = unique("m")
            made[lab.lxd2].add(moved)
            await action(pilot, app, f"local:{clone}", "move")
            await pick(pilot, app, "lab2")
            await answer(pilot, app, moved)
            await wait_for(pilot, lambda: moved in names(lab.lxd2)
                           and clone not in names(lab.lxd1), timeout=90,
                           what=f"moved ({notes(app)})")

            # publish the (stopped) instance, launch from the new alias with the CLI
            await action(pilot, app, f"local:{a}", "publish")
            await answer(pilot, app, alias)
            await pick(pilot, app, "private")
            await wait_for(pilot, lambda: any("Published" in n for n in notes(app)),
                           timeout=90, what=f"published ({notes(app)})")
            launched = unique("l")
            made[lab.lxd1].add(launched)
            lab.lxd1.cli("launch", alias, launched)
            assert launched in names(lab.lxd1)

            # the remote's images (the images view, this remote's only): the new one is
            # listed and can be deleted
            await action(pilot, app, f"local:{a}", "images")
            view = app.main_screen.query_one(ResourcePane).table

            def published() -> str | None:
                return next((k for k in view.shown if alias in view.items[k].obj.aliases),
                            None)

            await wait_for(pilot, lambda: app.main_screen.views.name == "images"
                           and published() is not None, timeout=20,
                           what="the published image listed")
            assert {view.items[k].remote for k in view.shown} == {"local"}
            assert app.main_screen.query_one("#filter", Input).value == "remote=local"
            view.move_cursor(row=view.shown.index(published()))
            view.focus()
            await pilot.press("d")
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog",
                           what="delete image?")
            await pilot.pause(0.3)
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: alias not in lab.lxd1.cli(
                "image", "list", "--format", "csv").stdout, timeout=30, what="image deleted")
            await wait_for(pilot, lambda: published() is None, what="its row gone")
            await pilot.press("escape", "escape")  # the filter cleared, the instances
            await wait_for(pilot, lambda: app.main_screen.views.name == "instances",
                           what="the instances")

            # rename (stopped) and description
            renamed = unique("n")
            made[lab.lxd1].add(renamed)
            await action(pilot, app, f"local:{a}", "rename")
            await answer(pilot, app, renamed)
            await wait_for(pilot, lambda: renamed in names(lab.lxd1), timeout=30,
                           what=f"renamed ({notes(app)})")
            await wait_for(pilot, lambda: f"local:{renamed}" in rows(app), what="new row")
            await action(pilot, app, f"local:{renamed}", "description")
            await answer(pilot, app, "web front end")
            await wait_for(pilot, lambda: "web front end" in lab.lxd1.cli(
                "config", "show", renamed).stdout, timeout=30, what="description")

            # a NIC with a static address on the test bridge
            await action(pilot, app, f"local:{renamed}", "nics")
            await wait_for(pilot, lambda: screen_name(app) == "NicScreen", what="NICs")
            await pilot.press("a")
            await answer(pilot, app, "eth5")
            await pick(pilot, app, "bridged")
            await answer(pilot, app, bridge)
            await answer(pilot, app, f"{net}.50")
            await answer(pilot, app, "")
            await wait_for(pilot, lambda: f"{net}.50" in lab.lxd1.cli(
                "config", "show", renamed).stdout, timeout=30,
                what=f"NIC added ({app.screen.query_one('#dialog-problem').render()})"
                if screen_name(app) == "NicScreen" else "NIC added")
            await wait_for(pilot, lambda: screen_name(app) == "NicScreen"
                           and app.screen.query_one(DataTable).row_count >= 1,
                           what="NIC listed")
            await pilot.press("escape")

            # password: the busybox image has no chpasswd, said in words
            await wait_for(pilot, lambda: f"lab2:{b}" in rows(app), what="b")
            await set_password(pilot, app, f"lab2:{b}", "s3cret-pw")
            await wait_for(pilot, lambda: any("chpasswd" in n for n in notes(app)),
                           timeout=30, what=f"the chpasswd refusal ({notes(app)})")
            assert not any("s3cret-pw" in n for n in notes(app))
            # with a chpasswd in the image, the new password reaches /etc/shadow
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
            from test_lxd_lifecycle_ops import CHPASSWD

            shim = tmp_path / "chpasswd"
            shim.write_text(CHPASSWD)
            lab.lxd2.cli("file", "push", "--mode", "0755", str(shim), f"{b}/bin/chpasswd")
            before = lab.lxd2.cli("exec", b, "--", "cat", "/etc/shadow").stdout
            await set_password(pilot, app, f"lab2:{b}", "s3cret-pw")
            await wait_for(pilot, lambda: any("Password of root" in n for n in notes(app)),
                           timeout=30, what=f"password changed ({notes(app)})")
            shadow = lab.lxd2.cli("exec", b, "--", "cat", "/etc/shadow").stdout
            assert shadow != before
            hashed = shadow.split(":")[1]
            salt = hashed.split("$")[2]
            check = lab.lxd2.cli("exec", b, "--", "sh", "-c",
                                 f"printf '%s\\n' 's3cret-pw' | mkpasswd -m sha512 -S '{salt}'")
            assert check.stdout.strip() == hashed
            assert not any("s3cret-pw" in n for n in notes(app))

            # w: the operations view opens (and lists what LXD still lists, if anything)
            await pilot.press("w")
            await wait_for(pilot, lambda: app.main_screen.views.name == "operations"
                           and app.focused is app.main_screen.query_one(ResourcePane).table,
                           what="operations")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.main_screen.views.name == "instances",
                           what="the instances")
    finally:
        for daemon, names_made in made.items():
            for name in names_made:
                daemon.cli("delete", "--force", name, check=False)
        lab.lxd1.cli("image", "delete", alias, check=False)
        lab.lxd1.cli("network", "delete", bridge, check=False)


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
@pytest.mark.lxc  # starts it itself (tests/tiers.py)
async def test_lifecycle_actions_on_qemu_and_lxc(tmp_path, monkeypatch):
    """Export/import, clone and rename from the actions menu on a local QEMU VM and an
    LXC container, checked with qemu-img and the lxc-* tools."""
    import os
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import qemu_guest

    from backends.qemu import QEMUBackend, qemu_remote

    kernel, initrd = qemu_guest.guest()
    run = f"/tmp/cq-act-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    vms = tmp_path / "vms"
    qemu = QEMUBackend(qemu_remote(str(vms)))
    await qemu.connect()
    await qemu.create("vm1", kernel=str(kernel), initrd=str(initrd), memory_mib=128,
                      disk_gib=1, cmdline="console=ttyS0", accel="tcg")
    await qemu.close()
    lxcpath = tmp_path / "lxcpath"
    cfg = write_config(tmp_path)

    busybox_container(lxcpath, "box1")

    def lxc_ls() -> list[str]:
        return lxc(lxcpath, "lxc-ls").stdout.split()

    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                             "XDG_RUNTIME_DIR": run})
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: {"qemu:vm1", "lxc:box1"} <= set(rows(app)),
                           what="the VM and the container")
            # QEMU: export, import under a new name, clone, rename
            archive = tmp_path / "vm1.tar"
            vm1 = next(r for r in app.inventory.instances if str(r) == "qemu:vm1")
            await wait_for(pilot, lambda: app.inventory.instances[vm1].snapshot_count == 0,
                           what="vm1's snapshots counted")
            await action(pilot, app, "qemu:vm1", "export")
            await answer(pilot, app, str(archive))  # no snapshot: nothing to choose
            await wait_for(pilot, lambda: any("Exported" in n for n in notes(app)),
                           timeout=60, what=f"exported ({notes(app)})")
            await action(pilot, app, "qemu:vm1", "import")
            await answer(pilot, app, str(archive))
            await answer(pilot, app, "vm2")
            await wait_for(pilot, lambda: "qemu:vm2" in rows(app), timeout=60,
                           what=f"imported ({notes(app)})")
            assert (vms / "vm2" / "disk0.qcow2").exists()
            await action(pilot, app, "qemu:vm2", "clone")
            await answer(pilot, app, "vm3")
            await pick(pilot, app, "full")
            await wait_for(pilot, lambda: "qemu:vm3" in rows(app), timeout=60,
                           what=f"cloned ({notes(app)})")
            info = subprocess.run(["qemu-img", "info", str(vms / "vm3" / "disk0.qcow2")],
                                  capture_output=True, text=True).stdout
            assert "1 GiB" in info
            await action(pilot, app, "qemu:vm3", "rename")
            await answer(pilot, app, "vm4")
            await wait_for(pilot, lambda: "qemu:vm4" in rows(app)
                           and "qemu:vm3" not in rows(app), timeout=30,
                           what=f"renamed ({notes(app)})")
            assert (vms / "vm4" / "vm.json").exists() and not (vms / "vm3").exists()

            # LXC: clone and rename, checked with lxc-ls
            await action(pilot, app, "lxc:box1", "clone")
            await answer(pilot, app, "box2")
            await pick(pilot, app, "full")
            await wait_for(pilot, lambda: "box2" in lxc_ls(), timeout=60,
                           what=f"LXC clone ({notes(app)})")
            await wait_for(pilot, lambda: "lxc:box2" in rows(app), what="box2 row")
            await action(pilot, app, "lxc:box2", "rename")
            await answer(pilot, app, "box3")
            await wait_for(pilot, lambda: "box3" in lxc_ls()
                           and "box2" not in lxc_ls(), timeout=60,
                           what=f"LXC rename ({notes(app)})")
    finally:
        subprocess.run(["rm", "-rf", run])
