"""On a host with a system LXD, the app under test lists only what its test gave it.

The "system LXD" is simulated two ways: a socket at the fake host's system path (what
``tests/tui/test_table_render.py`` met on a host with a system LXD: 14 rows instead of 7),
and the lab's real ``lxd1`` daemon put behind the backends' default socket discovery."""

from __future__ import annotations

import socket
from pathlib import Path

from backends import remotes
from backends.fake import FakeBackend
from backends.models import ConnectionState, InstanceStatus, InstanceType
from tui.app import make_app
from tui.widgets.instance_table import InstanceTable

from .test_real_app import wait_for

NAMES = [f"c{i}" for i in range(7)]
CONFIG = ('[ui]\nmetrics_interval = 600\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
          '[[remote]]\nname = "alpha"\nkind = "lxd"\naddress = "/nonexistent/a.sock"\n')


async def _rows(tmp_path, env, factory=None):
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG)
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.main_screen.query_one(InstanceTable)

        def listed():
            return sorted(str(ref) for ref in table.refs.values())

        def settled():  # every remote answered, and each connected one has its rows shown
            statuses = app.inventory.statuses
            return statuses and all(
                st.state is not ConnectionState.CONNECTING
                and (st.state is not ConnectionState.CONNECTED
                     or any(r.startswith(f"{name}:") for r in listed()))
                for name, st in statuses.items())

        await wait_for(pilot, settled, what=lambda: f"every remote's rows: {listed()}")
        return listed()


async def test_a_system_lxd_socket_is_not_listed(tmp_path, hermetic_env):
    """A socket where the host's LXD lives: an environment of HOME alone lists it (every
    remote gets the fake's 7 rows: 14), the hermetic one does not (7)."""
    path = Path(remotes.lxd_socket_path({"HOME": str(tmp_path)}))
    assert not path.is_relative_to("/var")  # the fake host, never the real one
    path.parent.mkdir(parents=True, exist_ok=True)
    specs = [(n, InstanceType.CONTAINER, InstanceStatus.RUNNING) for n in NAMES]

    def factory(remote, timeout):
        return FakeBackend(remote, instances=specs)

    with socket.socket(socket.AF_UNIX) as system:
        system.bind(str(path))
        try:
            bare = await _rows(tmp_path, {"HOME": str(tmp_path)}, factory)
            hermetic = await _rows(tmp_path, hermetic_env, factory)
        finally:
            path.unlink()
    assert len(bare) == 14 and {r.split(":")[0] for r in bare} == {"alpha", "local"}
    assert hermetic == sorted(f"alpha:{n}" for n in NAMES)


async def test_a_real_system_lxd_is_not_listed(tmp_path, hermetic_env, lab, unique, monkeypatch):
    """The lab's lxd1 as the host's system LXD (the default socket discovery points at it):
    the app with a HOME-only environment shows its container (the simulation is faithful),
    the app with the hermetic environment does not."""
    name = unique()
    lab.lxd1.cli("init", "busybox", name)
    try:
        default = remotes.lxd_socket_path

        def system_lxd(env):
            if env.get("LXD_SOCKET") or env.get("LXD_DIR"):
                return default(env)
            return str(lab.lxd1.socket)

        monkeypatch.setattr(remotes, "lxd_socket_path", system_lxd)
        bare = await _rows(tmp_path, {"HOME": str(tmp_path)})
        hermetic = await _rows(tmp_path, hermetic_env)
    finally:
        lab.lxd1.cli("delete", "--force", name)
    assert f"local:{name}" in bare
    assert not [r for r in hermetic if r.startswith("local:")] and hermetic == []
