"""The launch wizard's "Import a VM…" source, by keys against real QEMU (TCG): an OVA's
summary says what was understood and what not before anything is made, the imported VM
is created, starts and boots (its serial console prints the guest's marker); a refused
package keeps Create disabled with the reason; a running conversion stops on x and
leaves nothing. A VirtualBox machine folder and a libvirt domain XML file each become a
VM that boots and answers typed commands on its serial console tab."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import import_fixtures as fx
from test_real_app import rows, wait_for, write_config
from wizard_keys import choose, fill, problem, source_fields

MiB = 1 << 20


def summary(app) -> str:
    return str(app.screen.query_one("#wizard-summary").render())


def vbox_ova(tmp_path: Path, raw: Path, name: str) -> Path:
    vmdk = fx.convert(raw, tmp_path / f"{name}-disk001.vmdk", "vmdk")
    return fx.make_ova(tmp_path / f"{name}.ova", [
        (f"{name}.ovf", fx.vbox7_ovf(name, [(vmdk.name, raw.stat().st_size)])),
        (vmdk.name, vmdk)])


async def to_summary(pilot, app, path: str) -> None:
    """N, the qemu remote, "Import a VM…", the path; then Next through every step with
    the values the package suggested."""
    await pilot.press("N")
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WizardScreen",
                   timeout=30, what="the wizard")
    names = list(app.screen.backends)
    await choose(pilot, app, "#wizard-remote", lambda i: names[i] == "qemu", "qemu")
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.screen.step == "what", what="the 'what' step")
    sources = app.screen.sources
    await choose(pilot, app, "#wizard-source", lambda i: sources[i].kind == "vm-import",
                 "Import a VM…")
    await source_fields(pilot, app, "#wizard-field-value")
    await fill(pilot, app, "#wizard-field-value", path)
    await pilot.press("ctrl+n")
    await wait_for(pilot, lambda: app.screen.step == "name", timeout=60,
                   what=lambda: f"the name step ({problem(app)})")
    for step in ("resources", "network", "summary"):
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: app.screen.step == step,
                       what=lambda: f"the {step} step ({problem(app)})")


def slow_qemu_img(tmp_path: Path) -> Path:
    """A directory whose qemu-img is the real one, converting at 2 MiB/s."""
    import shutil
    real = shutil.which("qemu-img")
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "qemu-img"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = convert ]; then shift; exec {real} convert '
                       f'-r 2M "$@"; fi\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
async def test_import_wizard_summary_boot_refusal_and_cancel(tmp_path, monkeypatch):
    run = f"/tmp/cq-wimp-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    vms = tmp_path / "vms"
    app = make_app(write_config(tmp_path),
                   env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                        "XDG_RUNTIME_DIR": run})
    boot = vbox_ova(tmp_path, fx.boot_disk(), "Boot_Me")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "h.ovf").write_bytes(fx.vmware_ovf("h", [("../../etc/passwd", 0, 0)]))
    big = tmp_path / "big"
    big.mkdir()
    block = os.urandom(MiB)
    with open(big / "big.img", "wb") as f:
        for _ in range(64):
            f.write(block)
    (big / "big.ovf").write_bytes(fx.vmware_ovf("big", [("big.img", 0, 0)], efi=False)
                                  .replace(fx.VMDK_FORMAT.encode(), b"raw"))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.inventory.statuses["qemu"].state.value
                           == "connected", what="qemu remote")
            # the summary, before anything is made; the name and sizes come from the OVA
            await to_summary(pilot, app, str(boot))
            text = summary(app)
            assert app.screen.query_one("#wizard-name").value == "boot-me"
            assert app.screen.query_one("#wizard-memory").value == "256MiB"
            for needle in (f"OVA: {boot}", "understood: 1 CPU, 256 MiB of memory",
                           "disk order: disk 1: Boot_Me-disk001.vmdk", "not mapped: a USB",
                           "target size on disk: about"):
                assert needle in text, (needle, text)
            assert [p.name for p in vms.iterdir() if not p.name.startswith(".")] == []
            # Create: converted, started, booted
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: rows(app).get("qemu:boot-me", [None] * 4)[3]
                           == "running", timeout=90, what=lambda: (
                               f"boot-me running: row {rows(app).get('qemu:boot-me')}, "
                               f"screen {type(app.screen).__name__}, notifications "
                               f"{[n.message for n in app._notifications]}"))
            log = Path(run) / "corral" / "qemu" / "boot-me" / "serial.log"
            await wait_for(pilot, lambda: log.exists() and "corral-guest ready"
                           in log.read_text(errors="replace"), timeout=90,
                           what="the guest's marker on its serial console")

            # a refused package: said on the summary, Create stays disabled
            await to_summary(pilot, app, str(hostile))
            assert "not a file name inside the package" in problem(app)
            assert app.screen.query_one("#next").disabled
            assert "cannot import: " in summary(app)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")

            # x stops a running conversion; nothing is left (qemu-img converts at
            # 2 MiB/s here, its own -r rate limit, so the key surely comes while it runs)
            monkeypatch.setenv("PATH", f"{slow_qemu_img(tmp_path)}:{os.environ['PATH']}")
            await to_summary(pilot, app, str(big))
            await pilot.press("ctrl+n")
            progress = app.screen.query_one("#wizard-progress")
            await wait_for(pilot, lambda: "converting disk 1 of 1" in str(progress.render()),
                           timeout=30, what=lambda: f"the conversion ({progress.render()})")
            assert "Cancel creation (x)" in str(app.screen.query_one("#cancel").label)
            await pilot.press("x")
            await wait_for(pilot, lambda: "Cancelled: big was not created"
                           in str(progress.render()), what="cancelled")
            assert sorted(p.name for p in vms.iterdir()) == ["boot-me"]
            await pilot.press("escape")
    finally:
        import shutil
        import signal
        pid = Path(run) / "corral" / "qemu" / "boot-me" / "qemu.pid"  # as the serial log
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)


def vbox_folder(tmp_path: Path, raw: Path, name: str) -> Path:
    """A VirtualBox machine folder: the ``.vbox`` file and its VDI beside it."""
    folder = tmp_path / "VirtualBox VMs" / name
    folder.mkdir(parents=True)
    fx.convert(raw, folder / f"{name}.vdi", "vdi")
    (folder / f"{name}.vbox").write_bytes(fx.vbox_file(name, [(f"{name}.vdi", "VDI")]))
    return folder / f"{name}.vbox"


def libvirt_xml(tmp_path: Path, raw: Path, name: str) -> Path:
    """A libvirt domain XML file whose first (boot order 1) disk is a qcow2 of ``raw``."""
    (tmp_path / "images").mkdir(exist_ok=True)
    disk = fx.convert(raw, tmp_path / "images" / f"{name}.qcow2", "qcow2")
    xml = tmp_path / f"{name}.xml"
    xml.write_bytes(fx.libvirt_domain(name, [(str(disk), "qcow2")]))
    return xml


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
async def test_vbox_folder_and_libvirt_xml_import_and_answer_on_the_serial_console(
        tmp_path, monkeypatch):
    """A VirtualBox machine folder and a libvirt domain XML file, each through "Import a
    VM…" by keys, become VMs that boot under TCG; typed on each one's serial console tab,
    ``echo import-$((6*7))`` answers ``import-42``; the sources are left as they were."""
    from test_consoles_app import open_tab, type_line, wait_screen

    run = f"/tmp/cq-wimp2-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    app = make_app(write_config(tmp_path),
                   env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                        "XDG_RUNTIME_DIR": run})
    raw = fx.boot_disk()
    sources = [("vbox-boot", vbox_folder(tmp_path, raw, "VBox_Boot"),
                ("VirtualBox machine", "disk 1: VBox_Boot.vdi (SATA port 0) — vdi")),
               ("lv-boot", libvirt_xml(tmp_path, raw, "lv-boot"),
                ("libvirt domain", "disk 1: ", "lv-boot.qcow2", "not mapped: a SPICE"))]
    before = {path: path.read_bytes() for _n, path, _w in sources}
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.inventory.statuses["qemu"].state.value
                           == "connected", what="qemu remote")
            for name, path, needles in sources:
                await to_summary(pilot, app, str(path))
                assert app.screen.query_one("#wizard-name").value == name
                text = summary(app)
                for needle in (*needles, "firmware: BIOS (SeaBIOS)"):
                    assert needle in text, (needle, text)
                await pilot.press("ctrl+n")
                await wait_for(pilot, lambda: rows(app).get(f"qemu:{name}", [None] * 4)[3]
                               == "running", timeout=120, what=f"{name} running")
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.main_screen,
                               what="the wizard closed")
                await open_tab(pilot, app, f"qemu:{name}", "c")
                await wait_screen(pilot, app, "corral-guest ready", timeout=120)
                await type_line(pilot, "echo import-$((6*7))")
                await wait_screen(pilot, app, "import-42", timeout=30)
                await pilot.press("ctrl+right_square_bracket")
        assert {path: path.read_bytes() for _n, path, _w in sources} == before
    finally:
        import shutil
        import signal
        for name, _p, _w in sources:
            pid = Path(run) / "corral" / "qemu" / name / "qemu.pid"
            if pid.exists():
                os.kill(int(pid.read_text()), signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)
