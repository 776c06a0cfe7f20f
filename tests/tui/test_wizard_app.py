"""The launch wizard, the resource editor and snapshots, driven by keys against real
QEMU (TCG) and real LXC, each result checked with the backend's own tool."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tui.app import make_app
from tui.widgets.details import SnapshotTable
from tui.widgets.instance_table import InstanceTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import rows, select, wait_for, write_config
from wizard_keys import fill, problem, wizard


def status(app, ref):
    return rows(app).get(ref, [None] * 4)[3]


def notes(app):
    return [str(n.message) for n in app._notifications]


async def edit_limit(pilot, app, ref: str, key: str, value: str) -> None:
    select(app, ref)
    # the highlight message updates the selection and the keys it allows: let it arrive
    # before the key (a busy CI machine took the key first, twice: the editor never
    # opened; a pause of 0.1 s was not always enough)
    await wait_for(pilot, lambda: str(app.main_screen.selected) == ref
                   and app.main_screen.query_one(InstanceTable).has_focus,
                   what=f"{ref} selected")
    await pilot.press("L")
    # the editor reads every limit first (LXC: one tool run per cgroup file; slow when
    # the machine is busy)
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "LimitsScreen"
                   and app.screen.loaded, timeout=60,
                   what=lambda: f"the {key} field (screen {app.screen.__class__.__name__}, "
                                f"{notes(app)})")
    await fill(pilot, app, f"#limit-{key}", value)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "MainScreen",
                   what=f"the change applied ({app.screen.query_one('#limits-error').render()}"
                        if app.screen.query("#limits-error") else "applied")


async def take_snapshot(pilot, app, ref: str) -> str:
    select(app, ref)
    await pilot.press("i")  # the snapshots tab
    await pilot.press("n")
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SnapshotDialog",
                   what="the snapshot dialog")
    name = app.screen.query_one("#snapshot-name").value
    table = app.main_screen.query_one(SnapshotTable)
    before = table.row_count
    await pilot.press("enter")
    # LXC names its snapshots itself (snap0…) and keeps the typed name as the comment
    await wait_for(pilot, lambda: table.row_count == before + 1 and any(
        name in (s.name, s.comment) for s in getattr(table, "snapshots", {}).values()),
        timeout=60, what=f"snapshot {name} listed ({notes(app)})")
    return name


async def confirm(pilot, app) -> None:
    await wait_for(pilot, lambda: app.screen.query("#confirm"), what="a confirmation")
    await pilot.pause(0.3)
    await pilot.click("#confirm")


async def network_boot_named(pilot, app, name: str) -> None:
    """The wizard on its first remote, a network-boot source, ``name`` typed on the name
    step."""
    await pilot.press("N")
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WizardScreen",
                   what="wizard")
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.screen.step == "what", what="what")
    app.screen.source = next(s for s in app.screen.sources if s.kind == "pxe")
    await pilot.press("ctrl+n")
    await fill(pilot, app, "#wizard-name", name)


async def restore_then_delete(pilot, app, restored: str, deleted) -> None:
    """In the snapshot table: restore the selected snapshot (enter, confirmed) until a
    note holds ``restored``, then delete it (d, confirmed) until ``deleted()``."""
    table = app.main_screen.query_one(SnapshotTable)
    table.focus()
    await pilot.press("enter")  # restore
    await confirm(pilot, app)
    await wait_for(pilot, lambda: any(restored in n for n in notes(app)),
                   timeout=60, what=lambda: f"{restored!r} in the notes ({notes(app)})")
    table.focus()
    await pilot.press("d")
    await confirm(pilot, app)
    await wait_for(pilot, deleted, timeout=60, what="the snapshot deleted")


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
@pytest.mark.lxc  # starts it itself (tests/tiers.py)
async def test_wizard_limits_and_snapshots_on_qemu_and_lxc(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import qemu_guest

    kernel, initrd = qemu_guest.guest()
    run = f"/tmp/cq-wiz-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    cfg = write_config(tmp_path)
    lxcpath = tmp_path / "lxcpath"
    vms = tmp_path / "vms"
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": run}
    app = make_app(cfg, env=env)

    def lxc(*args) -> str:
        return subprocess.run([args[0], "-P", str(lxcpath), *args[1:]], check=True,
                              capture_output=True, text=True).stdout.strip()

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.inventory.statuses["qemu"].state.value
                           == "connected", what="qemu remote")
            # a bad name is refused as it is typed; nothing is created
            await network_boot_named(pilot, app, "Bad_Name")
            assert app.screen.query_one("#next").disabled
            assert "not a valid" in problem(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")
            assert not (vms / "Bad_Name").exists()

            # a bad size too: refused on the resources step, with the reason
            await network_boot_named(pilot, app, "sized")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.screen.step == "resources", what="resources")
            await fill(pilot, app, "#wizard-memory", "lots")
            assert app.screen.query_one("#next").disabled and "not a size" in problem(app)
            await fill(pilot, app, "#wizard-memory", "256MiB")
            await fill(pilot, app, "#wizard-cpus", "999")
            assert app.screen.query_one("#next").disabled and "this host has" in problem(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")
            assert not (vms / "sized").exists()

            # a QEMU VM from the kernel fixture, with a disk, started and booting
            await wizard(pilot, app, remote="qemu", source=lambda s: s.kind == "kernel",
                         path=str(kernel), fields={"#wizard-field-initrd": str(initrd),
                                                   "#wizard-field-cmdline": "console=ttyS0"},
                         name="vm1", cpus="1", memory="256MiB", disk="1GiB")
            await wait_for(pilot, lambda: status(app, "qemu:vm1") == "running",
                           timeout=30, what=f"vm1 running ({notes(app)})")
            log = Path(run) / "corral" / "qemu" / "vm1" / "serial.log"
            await wait_for(pilot, lambda: log.exists()
                           and "corral-guest ready" in log.read_text(errors="replace"),
                           timeout=60, what="vm1 booted")

            # an LXC container from the busybox template with a memory limit
            await wizard(pilot, app, remote="lxc", source=lambda s: s.value == "busybox",
                         name="box1", cpus="1", memory="128MiB")
            await wait_for(pilot, lambda: status(app, "lxc:box1") == "running",
                           timeout=30, what=f"box1 running ({notes(app)})")
            assert int(lxc("lxc-cgroup", "-n", "box1", "memory.limit_in_bytes")) == 128 << 20

            # memory changed live on each, verified at the source
            await edit_limit(pilot, app, "lxc:box1", "memory", "192MiB")
            await wait_for(pilot, lambda: int(lxc("lxc-cgroup", "-n", "box1",
                                                  "memory.limit_in_bytes")) == 192 << 20,
                           what="the cgroup limit")
            backend = app.inventory.backends["qemu"]
            ref = next(r for r in app.inventory.instances if str(r) == "qemu:vm1")
            await edit_limit(pilot, app, "qemu:vm1", "memory", "192MiB")
            balloon = {}

            async def poll():
                balloon.update(await backend.monitor.execute(ref, "query-balloon"))

            for _ in range(100):
                await poll()
                if balloon.get("actual") == 192 << 20:
                    break
                await asyncio.sleep(0.2)
            assert balloon["actual"] == 192 << 20
            # a restart-only change shows as pending in the editor
            await edit_limit(pilot, app, "qemu:vm1", "memory_max", "384MiB")
            select(app, "qemu:vm1")
            await pilot.press("L")
            await wait_for(pilot, lambda: app.screen.query(".limit-applies"),
                           what="the editor")
            shown = " ".join(str(w.render()) for w in app.screen.query(".limit-applies"))
            assert "384MiB pending" in shown
            await pilot.press("escape")

            # snapshots: take, restore, delete; checked with qemu-img / lxc-snapshot
            disk = vms / "vm1" / "disk0.qcow2"
            name = await take_snapshot(pilot, app, "qemu:vm1")
            listing = subprocess.run(["qemu-img", "snapshot", "-U", "-l", str(disk)],
                                     capture_output=True, text=True).stdout
            assert name in listing
            await restore_then_delete(
                pilot, app, "Restored",
                lambda: any("Deleted snapshot" in n for n in notes(app)))
            listing = subprocess.run(["qemu-img", "snapshot", "-U", "-l", str(disk)],
                                     capture_output=True, text=True).stdout
            assert name not in listing

            # LXC snapshots a stopped container (dir backing store)
            select(app, "lxc:box1")
            await pilot.press("s")
            await wait_for(pilot, lambda: status(app, "lxc:box1") == "stopped", timeout=30,
                           what="box1 stopped")
            lname = await take_snapshot(pilot, app, "lxc:box1")
            assert "snap0" in lxc("lxc-snapshot", "-n", "box1", "-L")
            comments = lxc("lxc-snapshot", "-n", "box1", "-L", "-C")
            assert lname in comments  # corral's name is kept as the snapshot's comment
            await restore_then_delete(
                pilot, app, "Restored lxc:box1",
                lambda: "snap0" not in lxc("lxc-snapshot", "-n", "box1", "-L"))
    finally:
        subprocess.run(["lxc-stop", "-P", str(lxcpath), "-n", "box1", "-k"],
                       capture_output=True)
        pid = Path(run) / "corral" / "qemu" / "vm1" / "qemu.pid"
        try:
            os.kill(int(pid.read_text().strip()), 9)
        except (OSError, ValueError):
            pass
        subprocess.run(["rm", "-rf", run])
