"""The small things a newcomer notices: natural name order, a footer that never cuts a
key, a killed VM's reason in its row, QEMU memory said honestly, the import name from the
backup itself (fast Pilot over the FakeBackend, and pure functions)."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace

from textual.widgets._footer import FooterKey

from backends.backup_name import original_name
from backends.fake import FakeBackend
from backends.models import InstanceState, InstanceStatus, InstanceType, Remote
from tui import format as fmt
from tui.app import make_app
from tui.widgets.instance_table import InstanceTable, natural_key

R, S = InstanceStatus.RUNNING, InstanceStatus.STOPPED
CT, VM = InstanceType.CONTAINER, InstanceType.VM


def _app(tmp_path, factory, remotes=("alpha",)):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n' + "".join(
                       f'[[remote]]\nname = "{n}"\nkind = "lxd"\naddress = "/none/{n}.sock"\n'
                       for n in remotes))
    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "x"),
           "INCUS_SOCKET": str(tmp_path / "y")}
    return make_app(cfg, env=env, factory=factory)


async def _settle(pilot):
    for _ in range(8):
        await pilot.pause(0.05)


def _names(app):
    table = app.screen.query_one(InstanceTable)
    return [table.refs[table.coordinate_to_cell_key((i, 0)).row_key.value].name
            for i in range(table.row_count)]


def test_natural_key_orders_numbers_as_numbers():
    names = ["s10", "s2", "S1", "web10", "web9", "db"]
    assert sorted(names, key=natural_key) == ["db", "S1", "s2", "s10", "web9", "web10"]


async def test_table_sorts_names_naturally(tmp_path):
    app = _app(tmp_path, lambda r, t: FakeBackend(
        r, instances=[(n, CT, R) for n in ("s10", "s2", "s1", "s100")]))
    async with app.run_test(size=(140, 30)) as pilot:
        await _settle(pilot)
        assert _names(app) == ["s1", "s2", "s10", "s100"]


async def test_footer_never_cuts_a_key(tmp_path):
    for width in (200, 140, 100, 80):
        app = _app(tmp_path, lambda r, t: FakeBackend(r, instances=[("web1", CT, R)]))
        async with app.run_test(size=(width, 30)) as pilot:
            await _settle(pilot)
            keys = list(app.screen.query(FooterKey))
            palette = next(k for k in keys if k.has_class("-command-palette"))
            shown = [k for k in keys if k.display and k is not palette]
            assert shown, width
            for key in shown:  # every key whole, left of the palette key
                assert key.region.right <= palette.region.x, (width, key.description)
                assert key.region.width >= len(key.description), (width, key.description)
            if width >= 140:
                assert {"Start", "Stop", "Quit", "Help"} <= {k.description for k in shown}
            descriptions = [k.description for k in shown]
            assert "Quit" in descriptions and "Help" in descriptions


async def test_a_killed_vm_shows_its_reason_in_the_row(tmp_path):
    backends = {}

    def factory(remote: Remote, timeout: float):
        b = FakeBackend(remote, instances=[("vm1", VM, S), ("ok", CT, S)])
        b.data["vm1"] = replace(b.data["vm1"], extra={
            "reason": "QEMU exited (it was stopped or killed outside corral)"})
        backends[remote.name] = b
        return b

    app = _app(tmp_path, factory)
    async with app.run_test(size=(140, 30)) as pilot:
        await _settle(pilot)
        table = app.screen.query_one(InstanceTable)
        rows = {table.refs[k].name: [str(c) for c in table.get_row(k)] for k in table.refs}
        assert rows["vm1"][3] == "stopped !" and rows["ok"][3] == "stopped"
        table.move_cursor(row=_names(app).index("vm1"))
        await _settle(pilot)
        assert "killed outside corral" in str(table.tooltip)
        table.move_cursor(row=_names(app).index("ok"))
        await _settle(pilot)
        assert table.tooltip is None


def test_qemu_memory_is_said_honestly():
    given = InstanceState(memory_usage=128 << 20, memory_limit=128 << 20,
                          memory_is_allocation=True)
    used = InstanceState(memory_usage=40 << 20, memory_limit=128 << 20)
    assert fmt.memory(given, 128 << 20).endswith("given")
    assert "/" in fmt.memory(used, 128 << 20) and "given" not in fmt.memory(used, 128 << 20)


def _tar(path, members: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


async def test_import_name_comes_from_the_backup_itself(tmp_path):
    lxd = _tar(tmp_path / "local-web1-20261201.tar.gz", {
        "backup/index.yaml": b"name: web1\nbackend: dir\n", "backup/container/x": b"1"})
    qemu = _tar(tmp_path / "qemu-vm-7.tar.gz", {
        "vm.json": json.dumps({"name": "vm-7", "memory_mib": 256}).encode()})
    lxc = _tar(tmp_path / "lxc-c1.tar.gz", {
        "./config": b"lxc.uts.name = c1\nlxc.rootfs.path = dir:/x\n"})
    other = _tar(tmp_path / "random.tar.gz", {"hello.txt": b"hi"})
    assert await original_name(lxd) == "web1"
    assert await original_name(qemu) == "vm-7"
    assert await original_name(lxc) == "c1"
    assert await original_name(other) is None
    (tmp_path / "broken.tar.gz").write_bytes(b"not a tar")
    assert await original_name(str(tmp_path / "broken.tar.gz")) is None
