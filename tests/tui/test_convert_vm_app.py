""""Convert to a local QEMU VM…" on a domain of the suite's private libvirt
(tests/lab_libvirt.py), by keys: the actions menu offers it, the conversion screen shows
the import summary, Convert makes a local QEMU VM from the domain's XML and a copy of its
raw disk (tests/import_fixtures.py's SYSLINUX boot disk), which boots under TCG and answers
on its serial console tab; a second conversion stopped by x leaves nothing; the domain's
definition (``virsh dumpxml``) and its disk are unchanged."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import import_fixtures as fx
import lab_libvirt
from test_actions_app import action
from test_consoles_app import open_tab, type_line, wait_screen
from test_real_app import rows, select, wait_for, write_config
from test_wizard_import_app import slow_qemu_img

DOMAIN = """\
<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
  </os>
  <devices>
    <emulator>{emulator}</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{disk}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='user'>
      <mac address='52:54:00:c0:11:42'/>
      <model type='virtio'/>
    </interface>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <sound model='ich9'/>
  </devices>
</domain>
"""


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


def virsh(vlab, *args: str) -> str:
    return subprocess.run(["virsh", "-c", vlab.unix_uri, *args], check=True,
                          capture_output=True, text=True, timeout=60).stdout


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.qemu  # the converted VM runs under corral's own QEMU backend
async def test_libvirt_domain_converts_to_a_local_qemu_vm_that_boots(vlab, tmp_path,
                                                                      monkeypatch):
    name = f"conv{os.getpid()}"
    disk = tmp_path / f"{name}.raw"
    shutil.copyfile(fx.boot_disk(), disk)
    emulator = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
    lab_libvirt.define(vlab, DOMAIN.format(name=name, emulator=emulator, disk=disk))
    before, disk_before = virsh(vlab, "dumpxml", name), digest(disk)
    run = f"/tmp/cq-conv-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    cfg = write_config(tmp_path, extra=f'[[remote]]\nname = "virt"\nkind = "libvirt"\n'
                                       f'uri = "{vlab.unix_uri}"\n')
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                             "XDG_RUNTIME_DIR": run})
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: f"virt:{name}" in rows(app)
                           and app.inventory.statuses["qemu"].state.value == "connected",
                           timeout=60, what="the domain and the qemu remote")
            await action(pilot, app, f"virt:{name}", "convert_vm")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConvertScreen",
                           what="the conversion screen")
            screen = app.screen
            await wait_for(pilot, lambda: screen.summary_ready, timeout=60, what=lambda: str(
                screen.query_one("#convert-summary").render()))
            text = str(screen.query_one("#convert-summary").render())
            for needle in ("libvirt domain: ", "understood: 1 CPU, 256 MiB of memory",
                           f"disk order: disk 1: {disk}", "not mapped: a sound card",
                           "target size on disk: about"):
                assert needle in text, (needle, text)
            assert screen.query_one("#convert-name").value == name
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.screen is app.main_screen, timeout=120,
                           what=lambda: str(screen.query_one("#convert-progress").render()))
            await wait_for(pilot, lambda: rows(app).get(f"qemu:{name}", [None] * 4)[3]
                           == "stopped", timeout=30, what="the new VM listed, stopped")
            select(app, f"qemu:{name}")
            await pilot.press("S")
            await wait_for(pilot, lambda: rows(app)[f"qemu:{name}"][3] == "running",
                           timeout=60, what="the converted VM running")
            await open_tab(pilot, app, f"qemu:{name}", "c")
            await wait_screen(pilot, app, "corral-guest ready", timeout=120)
            await type_line(pilot, "echo import-$((6*7))")
            await wait_screen(pilot, app, "import-42", timeout=30)
            await pilot.press("ctrl+right_square_bracket")
            assert rows(app)[f"virt:{name}"][3] == "stopped"  # the original never ran

            # again under a new name, stopped by x half way: nothing is left (qemu-img
            # converts at 2 MiB/s here, so the key surely comes while it runs)
            monkeypatch.setenv("PATH", f"{slow_qemu_img(tmp_path)}:{os.environ['PATH']}")
            await action(pilot, app, f"virt:{name}", "convert_vm")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConvertScreen",
                           what="the conversion screen again")
            screen = app.screen
            await wait_for(pilot, lambda: screen.summary_ready, timeout=60, what="summary")
            assert screen.query_one("#convert-name").value == ""  # its own name is taken
            assert "A name is needed" in str(screen.query_one("#convert-problem").render())
            await pilot.press(*"second", "ctrl+n")
            progress = screen.query_one("#convert-progress")
            await wait_for(pilot, lambda: "converting disk 1 of 1" in str(progress.render()),
                           timeout=30, what=lambda: f"the conversion ({progress.render()})")
            await pilot.press("x")
            await wait_for(pilot, lambda: "Stopped: second was not created"
                           in str(progress.render()), what=lambda: str(progress.render()))
            assert sorted(p.name for p in (tmp_path / "vms").iterdir()) == [name]
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")
        assert virsh(vlab, "dumpxml", name) == before
        assert digest(disk) == disk_before
        converted = tmp_path / "vms" / name
        assert (converted / "disk0.qcow2").is_file()
    finally:
        pid = Path(run) / "corral" / "qemu" / name / "qemu.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run(["virsh", "-c", vlab.unix_uri, "undefine", name], capture_output=True)
