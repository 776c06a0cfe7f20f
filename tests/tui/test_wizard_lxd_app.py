"""The launch wizard, the resource editor and snapshots on the real LXD daemons (unix
socket and HTTPS) and Incus, driven by keys and checked with the real lxc/incus CLI."""

from __future__ import annotations

import sys
from pathlib import Path

from tui.app import make_app
from tui.widgets.details import SnapshotTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import rows, wait_for, write_config
from test_wizard_app import confirm, edit_limit, notes, take_snapshot
from wizard_keys import problem, wizard

GOOD_YAML = "#cloud-config\nruncmd:\n  - [touch, /tmp/ok]\n"
BAD_YAML = "#cloud-config\nruncmd: [unclosed\n"


async def on_snapshot(pilot, app, table, snap):
    """The snapshots tab has the focus and its cursor on ``snap``: a key pressed on the tab
    with no snapshot under the cursor does nothing (the tab is read again after a restore,
    and under load that can still be going on when the next key is pressed)."""
    def ready():
        if app.focused is not table:
            table.focus()
            return False
        return table.selected is not None and table.selected.name == snap
    await wait_for(pilot, ready, timeout=30,
                   what=lambda: f"the cursor on {snap} in the focused snapshots tab "
                                f"(focus: {app.focused!r}, rows: {list(table.snapshots)})")


async def test_wizard_limits_snapshots_on_lxd_and_incus(lab, lab_env, unique, tmp_path):
    a, b, c = unique("a"), unique("b"), unique("c")
    daemons = {"local": lab.lxd1, "lab2": lab.lxd2, "inc1": lab.incus1}
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: all(app.inventory.statuses[r].state.value
                                              == "connected" for r in daemons),
                           what="the three remotes")
            # bad user-data keeps the wizard on its step, with the YAML error in words
            await pilot.press("N")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WizardScreen",
                           what="wizard")
            screen = app.screen
            screen.remote = "local"
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.step == "what", what="what")
            await pilot.press("ctrl+n")
            await pilot.press(*"x-bad")
            await pilot.press("enter", "ctrl+n", "ctrl+n")
            await wait_for(pilot, lambda: screen.step == "cloud-init", what="cloud-init")
            screen.query_one("#wizard-user-data").text = BAD_YAML
            await pilot.pause(0.2)
            assert screen.query_one("#next").disabled
            assert "Not valid YAML" in problem(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")
            assert "x-bad" not in lab.lxd1.cli("list", "-c", "n", "--format", "csv").stdout

            for remote, name in (("local", a), ("lab2", b), ("inc1", c)):
                await wizard(pilot, app, remote=remote,
                             source=lambda s: s.kind == "image" and "busybox" in s.label,
                             name=name, cpus="1", memory="256MiB",
                             user_data=GOOD_YAML)
                ref = f"{remote}:{name}"
                await wait_for(pilot, lambda: rows(app).get(ref, [None] * 4)[3] == "running",
                               timeout=60, what=f"{ref} running ({notes(app)})")
                daemon = daemons[remote]
                assert daemon.cli("config", "get", name, "limits.memory").stdout.strip() \
                    == "256MiB"
                assert daemon.cli("config", "get", name, "limits.cpu").stdout.strip() == "1"
                assert "touch" in daemon.cli("config", "get", name,
                                             "cloud-init.user-data").stdout

            # memory changed live, seen by the daemon
            await edit_limit(pilot, app, f"local:{a}", "memory", "300MiB")
            await wait_for(pilot, lambda: lab.lxd1.cli("config", "get", a, "limits.memory")
                           .stdout.strip() == "300MiB", what="limits.memory updated")
            # weights and limits of the hosting panels, seen in `lxc config show`
            for key, value, where in (("cpu_allowance", "50%", ["limits.cpu.allowance"]),
                                      ("processes", "100", ["limits.processes"]),
                                      ("disk_read", "10MB", ["device", "get", a, "root",
                                                             "limits.read"])):
                await edit_limit(pilot, app, f"local:{a}", key, value)
                argv = ["config", *where] if where[0] == "device" else \
                    ["config", "get", a, *where]
                await wait_for(pilot, lambda: lab.lxd1.cli(*argv).stdout.strip() == value,
                               what=f"{key} set")
            await edit_limit(pilot, app, f"inc1:{c}", "memory", "200MiB")
            await wait_for(pilot, lambda: lab.incus1.cli("config", "get", c, "limits.memory")
                           .stdout.strip() == "200MiB", what="incus limits.memory updated")

            # snapshots: take, restore, delete; checked with `lxc info`
            for remote, name in (("local", a), ("lab2", b)):
                daemon = daemons[remote]
                # stopped first: a snapshot of a running container freezes it, and on a
                # busy host LXD's freeze times out ("freezing the container failed")
                daemon.cli("stop", "--force", name)
                await wait_for(pilot, lambda: rows(app).get(f"{remote}:{name}",
                                                            [None] * 4)[3] == "stopped",
                               timeout=30, what=f"{remote}:{name} stopped")
                snap = await take_snapshot(pilot, app, f"{remote}:{name}")
                assert snap in daemon.cli("info", name).stdout
                table = app.main_screen.query_one(SnapshotTable)
                # the snapshots tab reads the list in the background: enter needs its row
                await wait_for(pilot, lambda: snap in table.snapshots and table.row_count,
                               timeout=30, what=f"{snap} in the snapshots tab")
                await on_snapshot(pilot, app, table, snap)
                await pilot.press("enter")
                await confirm(pilot, app)
                await wait_for(pilot, lambda: any(f"Restored {remote}:{name}" in n
                                                  for n in notes(app)), timeout=90,
                               what=lambda: f"restored ({notes(app)})")
                await on_snapshot(pilot, app, table, snap)
                await pilot.press("d")
                await confirm(pilot, app)
                await wait_for(pilot, lambda: snap not in daemon.cli("info", name).stdout,
                               timeout=30, what="snapshot deleted")
    finally:
        for daemon, name in ((lab.lxd1, a), (lab.lxd2, b), (lab.incus1, c)):
            daemon.cli("delete", "--force", name, check=False)
