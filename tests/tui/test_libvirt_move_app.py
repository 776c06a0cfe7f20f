""""Move to another remote" on a running domain of the suite's private libvirt, to the
second lab host (tests/lab_libvirt.py's two hosts), by keys: the UI asks no "stop it
first?" (the backend says the domain can move live), the row shows the move under way,
and the domain runs on the other remote afterwards (``virsh domstate`` on both hosts)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import lab_libvirt
import qemu_guest
from test_actions_app import action, answer, pick, screen_name
from test_real_app import rows, wait_for, write_config


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def vlab2(request):
    return lab_libvirt.session_lab(request, second=True)


def state(lab, name: str) -> str:
    done = subprocess.run(["virsh", "-c", lab.unix_uri, "domstate", name],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else ""


async def test_a_running_domain_moves_live_without_being_stopped(vlab, vlab2, tmp_path):
    guest = qemu_guest.guest()
    name = f"lvmove-{uuid.uuid4().hex[:6]}"
    disk = vlab.images / f"{name}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(
        name, *guest, disks=((f"/var/lib/libvirt/images/{name}.qcow2", "qcow2"),)))
    subprocess.run(["virsh", "-c", vlab.unix_uri, "start", name], check=True,
                   capture_output=True)
    cfg = write_config(tmp_path, extra=(
        f'[[remote]]\nname = "va"\nkind = "libvirt"\nuri = "{vlab.unix_uri}"\n'
        f'[[remote]]\nname = "vb"\nkind = "libvirt"\nuri = "{vlab2.unix_uri}"\n'))
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    seen: set[str] = set()
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: rows(app).get(f"va:{name}", [None] * 4)[3]
                           == "running" and app.inventory.statuses["vb"].state.value
                           == "connected", timeout=60, what="the domain and the other host")
            await action(pilot, app, f"va:{name}", "move")
            await pick(pilot, app, "vb")
            await answer(pilot, app, name)

            def moved() -> bool:
                seen.add(screen_name(app))
                return rows(app).get(f"vb:{name}", [None] * 4)[3] == "running" \
                    and f"va:{name}" not in rows(app)

            await wait_for(pilot, moved, timeout=120, what=lambda: (
                rows(app).get(f"va:{name}"), rows(app).get(f"vb:{name}"), seen))
            assert "ConfirmDialog" not in seen  # never asked to stop it
            assert state(vlab2, name) == "running" and state(vlab, name) == ""
    finally:
        for lab in (vlab, vlab2):
            subprocess.run(["virsh", "-c", lab.unix_uri, "destroy", name], capture_output=True)
            subprocess.run(["virsh", "-c", lab.unix_uri, "undefine", name],
                           capture_output=True)
            (lab.images / f"{name}.qcow2").unlink(missing_ok=True)
