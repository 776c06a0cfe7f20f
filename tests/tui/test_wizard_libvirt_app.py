"""The launch wizard on the suite's private libvirt, reached over ``qemu+ssh://`` as a
server is: the kernel source's own fields (paths on the libvirt host, the command line, the
accelerator as a choice) are filled by keys, the domain is made and started by the daemon
(read back with ``virsh``, not through corral), and the console the wizard opens for it
answers."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from textual.widgets import Select
from tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import lab_libvirt
import qemu_guest
from test_consoles_app import active_view, screen_has, type_line
from test_real_app import rows, wait_for, write_config
from test_wizard_app import notes
from wizard_keys import choose, fill, problem, source_fields


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


def virsh(lab, *args: str, check: bool = True) -> str:
    return subprocess.run(["virsh", "-c", lab.unix_uri, *args], capture_output=True,
                          text=True, timeout=60, check=check).stdout


async def test_the_wizard_creates_a_kernel_boot_domain_over_ssh(vlab, tmp_path):
    kernel, initrd = qemu_guest.guest()
    name = f"lvwiz-{uuid.uuid4().hex[:6]}"
    cfg = write_config(tmp_path, extra=(
        f'[[remote]]\nname = "vs"\nkind = "libvirt"\nuri = "{vlab.ssh_uri()}"\n'))
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.inventory.statuses["vs"].state.value
                           == "connected", timeout=60, what="the libvirt remote")
            await pilot.press("N")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WizardScreen",
                           timeout=30, what="the wizard")
            names = list(app.screen.backends)
            await choose(pilot, app, "#wizard-remote", lambda i: names[i] == "vs", "vs")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.screen.step == "what", timeout=60,
                           what=lambda: f"the 'what' step ({problem(app)})")
            sources = app.screen.sources
            await choose(pilot, app, "#wizard-source", lambda i: sources[i].kind == "kernel",
                         "the kernel source")
            await source_fields(pilot, app, "#wizard-field-value", "#wizard-field-initrd",
                                "#wizard-field-cmdline", "#wizard-field-accel")
            await pilot.press("ctrl+n")  # the kernel is required: Next keeps the step
            assert app.screen.step == "what" and "Kernel" in problem(app), problem(app)
            await fill(pilot, app, "#wizard-field-value", str(kernel))
            await fill(pilot, app, "#wizard-field-initrd", str(initrd))
            assert app.screen.query_one("#wizard-field-cmdline").value == "console=ttyS0"
            accel = app.screen.query_one("#wizard-field-accel", Select)
            assert accel.value == "auto"
            accel.value = "qemu"  # TCG: the lab's KVM aborts
            await pilot.pause()
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.screen.step == "name",
                           what=f"the name step ({problem(app)})")
            await fill(pilot, app, "#wizard-name", name)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.screen.step == "resources",
                           what=f"the resources step ({problem(app)})")
            await fill(pilot, app, "#wizard-cpus", "1")
            await fill(pilot, app, "#wizard-memory", "128MiB")
            await fill(pilot, app, "#wizard-disk", "64MiB")
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.screen.step == "network",
                           what=f"the network step ({problem(app)})")
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.screen.step == "summary",
                           what=f"the summary ({problem(app)})")
            summary = str(app.screen.query_one("#wizard-summary").render())
            assert str(initrd) in summary and "TCG emulation" in summary, summary
            app.screen.query_one("#wizard-console").value = True  # "Open its console"
            await pilot.pause()
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: rows(app).get(f"vs:{name}", [None] * 4)[3]
                           == "running", timeout=120,
                           what=lambda: f"vs:{name} running (row: {rows(app).get(f'vs:{name}')}"
                                        f", notifications: {notes(app)})")
            # its serial console, opened by the wizard, answers (the guest may still boot)
            await wait_for(pilot, lambda: active_view(app) is not None
                           and app.focused is active_view(app), timeout=60,
                           what=lambda: f"the console tab focused ({notes(app)})")
            for _ in range(40):
                await type_line(pilot, "echo wiz-$((6*7))")
                try:
                    await wait_for(pilot, lambda: screen_has(app, "wiz-42"), timeout=3)
                    break
                except AssertionError:
                    continue
            view = active_view(app)
            assert screen_has(app, "wiz-42"), "\n".join(view.emulator.screen_text())
        state = virsh(vlab, "domstate", name).strip()
        assert state == "running", state
        xml = ET.fromstring(virsh(vlab, "dumpxml", "--inactive", name))
        assert xml.get("type") == "qemu"
        assert xml.findtext("os/kernel") == str(kernel)
        assert xml.findtext("os/initrd") == str(initrd)
        assert xml.findtext("os/cmdline") == "console=ttyS0"
        assert xml.find("devices/disk/source").get("file") \
            == f"/var/lib/libvirt/images/{name}.qcow2"
        assert int(xml.findtext("memory")) == 128 * 1024  # KiB
    finally:
        virsh(vlab, "destroy", name, check=False)
        virsh(vlab, "undefine", name, "--remove-all-storage", check=False)
