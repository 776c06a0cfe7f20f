"""The launch wizard asks before using a disk image that refers to other files (a qcow2
with a backing file naming a host secret), with real qemu-img and the real QEMU backend:
refused until the user agrees, created once they do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.app import make_app
from tui.screens.dialogs import ConfirmDialog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import wait_for, write_config
from wizard_keys import wizard


def backed_by(secret: Path, path: Path) -> Path:
    """A qcow2 at ``path`` (named like a raw image) whose backing file is ``secret``."""
    subprocess.run(["qemu-img", "create", "-f", "qcow2", "-F", "raw", "-b", str(secret),
                    str(path), "1M"], check=True, capture_output=True)
    return path


@pytest.mark.lxc  # its app runs lxc-ls and lxc-monitor on a private lxcpath
async def test_an_image_with_a_backing_file_is_used_only_after_asking(tmp_path, monkeypatch):
    run = f"/tmp/cq-wizsec-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    secret = tmp_path / "id_ed25519"
    secret.write_text("secret\n")
    os.chmod(secret, 0o600)
    trap = backed_by(secret, tmp_path / "disk.raw")
    cfg = write_config(tmp_path)
    vms = tmp_path / "vms"
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": run}
    app = make_app(cfg, env=env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.inventory.statuses["qemu"].state.value
                       == "connected", what="qemu remote")
        for agree in (False, True):
            name = "agreed" if agree else "refused"
            await wizard(pilot, app, remote="qemu", source=lambda s: s.kind == "disk-image",
                         path=str(trap), name=name, start=False)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog),
                           what="the question")
            message = app.screen.message
            assert "backing file" in message and str(secret) in message
            assert not (vms / name).exists()
            await pilot.pause(0.3)
            if agree:
                await pilot.click("#confirm")
                await wait_for(pilot, lambda name=name: (vms / name / "vm.json").exists(),
                               timeout=30, what="the VM defined")
            else:
                await pilot.press("escape")
                await wait_for(pilot, lambda: "backing file" in str(
                    app.screen.query_one("#wizard-progress").render()), what="the refusal")
                assert not (vms / name).exists()
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.main_screen, what="closed")
