"""The NIC screen of a libvirt domain offers the remote's libvirt networks (its
``list_networks``: a libvirt remote has no create options) and adds a NIC on the one picked,
by keys, on the suite's private libvirt; read back with ``virsh domiflist``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from textual.widgets import OptionList
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


def virsh(lab, *args: str) -> str:
    return subprocess.run(["virsh", "-c", lab.unix_uri, *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


async def test_the_nic_screen_offers_the_libvirt_networks(vlab, tmp_path):
    tag = uuid.uuid4().hex[:6]
    name, net = f"lvnic-{tag}", f"lvnicnet{tag}"
    xml = tmp_path / "net.xml"
    xml.write_text(f"<network><name>{net}</name><bridge name='lvnb{tag}'/></network>")
    virsh(vlab, "net-define", str(xml))
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *qemu_guest.guest()))
    cfg = write_config(tmp_path, extra=(
        f'[[remote]]\nname = "va"\nkind = "libvirt"\nuri = "{vlab.unix_uri}"\n'))
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: f"va:{name}" in rows(app), timeout=60,
                           what="the domain")
            await action(pilot, app, f"va:{name}", "nics")
            await wait_for(pilot, lambda: screen_name(app) == "NicScreen", what="NICs")
            await pilot.press("a")
            await answer(pilot, app, "eth7")
            await wait_for(pilot, lambda: screen_name(app) == "ChoiceDialog", what="kinds")
            options = app.screen.query_one(OptionList)
            ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
            assert f"network:{net}" in ids, ids
            await pick(pilot, app, f"network:{net}")
            await answer(pilot, app, "")
            await answer(pilot, app, "")
            await wait_for(pilot, lambda: net in virsh(vlab, "domiflist", name), timeout=30,
                           what="the NIC on the network")
    finally:
        subprocess.run(["virsh", "-c", vlab.unix_uri, "undefine", name], capture_output=True)
        subprocess.run(["virsh", "-c", vlab.unix_uri, "net-undefine", net],
                       capture_output=True)
