""""Export…" and "Import…" on a libvirt remote of the suite's private libvirt over
``qemu+ssh://`` (tests/lab_libvirt.py), by keys, as the LXD, QEMU and LXC ones: the
export dialog writes the archive and says so, the import dialog suggests the name the
archive records and makes the domain (its row appears; ``virsh`` finds it on its new
volume), and an archive naming a host device is refused in words with nothing made."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
from tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import lab_libvirt
import qemu_guest
from test_actions_app import action, answer
from test_real_app import rows, wait_for, write_config
from test_wizard_app import notes


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


def virsh(lab, *args: str) -> str:
    return subprocess.run(["virsh", "-c", lab.unix_uri, *args], capture_output=True,
                          text=True, timeout=60).stdout


def with_hostdev(good: Path, bad: Path) -> None:
    with tarfile.open(good) as tar, tarfile.open(bad, "w") as out:
        for member in tar.getmembers():
            data = tar.extractfile(member).read()
            if member.name == "domain.xml":
                data = data.replace(b"</devices>", b"<hostdev mode='subsystem' type='pci'>"
                                    b"<source><address bus='0' slot='2'/></source></hostdev>"
                                    b"</devices>")
                member.size = len(data)
            out.addfile(member, io.BytesIO(data))


async def test_export_and_import_through_the_dialogs(vlab, tmp_path):
    guest = qemu_guest.guest()
    name = f"lvexp-{uuid.uuid4().hex[:6]}"
    disk = vlab.images / f"{name}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    virsh(vlab, "pool-refresh", "default")
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(
        name, *guest, disks=((f"/var/lib/libvirt/images/{name}.qcow2", "qcow2"),)))
    cfg = write_config(tmp_path, extra=(
        f'[[remote]]\nname = "far"\nkind = "libvirt"\nuri = "{vlab.ssh_uri()}"\n'))
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    archive, copy = tmp_path / "exported.tar", f"{name}-copy"
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: rows(app).get(f"far:{name}", [None] * 4)[3]
                           == "stopped", timeout=60, what="the domain")
            await action(pilot, app, f"far:{name}", "export")
            await answer(pilot, app, str(archive))  # no snapshot: nothing to choose
            await wait_for(pilot, lambda: any("Exported" in n for n in notes(app)),
                           timeout=60, what=lambda: f"exported ({notes(app)})")
            assert archive.is_file()

            await action(pilot, app, f"far:{name}", "import")
            await answer(pilot, app, str(archive))
            await wait_for(pilot, lambda: name in app.screen.query_one(
                "#dialog-input").value, what="the recorded name suggested")
            await answer(pilot, app, copy)
            await wait_for(pilot, lambda: f"far:{copy}" in rows(app), timeout=60,
                           what=lambda: f"imported ({notes(app)})")
            assert f"/var/lib/libvirt/images/{copy}-vda.qcow2" in virsh(
                vlab, "domblklist", copy)

            bad = tmp_path / "hostdev.tar"
            with_hostdev(archive, bad)
            before = virsh(vlab, "list", "--all", "--name"), virsh(vlab, "vol-list", "default")
            await action(pilot, app, f"far:{name}", "import")
            await answer(pilot, app, str(bad))
            await answer(pilot, app, f"{name}-bad")
            await wait_for(pilot, lambda: any("was not imported" in n and "hostdev" in n
                                              for n in notes(app)),
                           timeout=60, what=lambda: f"refused ({notes(app)})")
            assert (virsh(vlab, "list", "--all", "--name"),
                    virsh(vlab, "vol-list", "default")) == before
    finally:
        for dom in (name, copy):
            subprocess.run(["virsh", "-c", vlab.unix_uri, "undefine", dom],
                           capture_output=True)
        disk.unlink(missing_ok=True)
        subprocess.run(["virsh", "-c", vlab.unix_uri, "vol-delete", "--pool", "default",
                        f"{copy}-vda.qcow2"], capture_output=True)
