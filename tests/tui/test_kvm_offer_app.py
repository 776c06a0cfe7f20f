"""The start flow when KVM turns out not to work: corral says so and offers to start the
VM with TCG (fast UI test on the in-memory backend; the detection itself is tested against
real QEMU in tests/backends/test_qemu_kvm.py)."""

from __future__ import annotations

from backends.fake import FakeBackend
from backends.models import InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.screens.dialogs import ConfirmDialog

from .test_fake_app import select, settle, table_rows


async def test_start_offers_tcg_when_kvm_fails(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\n'
                   'enabled = false\n[[remote]]\nname = "vms"\nkind = "lxd"\n'
                   'address = "/nonexistent/a.sock"\n')
    backends = {}

    def factory(remote: Remote, timeout: float):
        backends[remote.name] = FakeBackend(
            remote, instances=[("vm1", InstanceType.VM, InstanceStatus.STOPPED)],
            kvm_broken={"vm1"})
        return backends[remote.name]

    app = make_app(cfg, env={"HOME": str(tmp_path)}, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "vms:vm1")
        await pilot.press("S")
        await settle(pilot, app)
        assert isinstance(app.screen, ConfirmDialog)
        assert "KVM does not work" in app.screen.message
        assert "TCG" in app.screen.title_text
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert [c[0] for c in backends["vms"].calls].count("start") == 2
        assert str(table_rows(app)["vms:vm1"][3]) == "running"
