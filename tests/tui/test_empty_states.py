"""The instance table teaches when it is empty: no remote, a remote with no instances, a
filter that matches nothing, a remote with a problem (Pilot over the FakeBackend; the
permission wording of a real socket is checked against a socket file we cannot open)."""

from __future__ import annotations

from backends.fake import FakeBackend
from backends.models import InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.widgets.empty_state import EmptyState

R = InstanceStatus.RUNNING
CT = InstanceType.CONTAINER


def _config(tmp_path, remotes: str = "") -> tuple:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n' + remotes)
    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return cfg, env


async def _settle(pilot) -> None:
    for _ in range(6):
        await pilot.pause(0.05)


def _message(app) -> str:
    empty = app.screen.query_one(EmptyState)
    return str(empty.render()) if empty.has_class("-visible") else ""


async def test_no_remote_names_what_was_looked_for_and_the_keys(tmp_path):
    cfg, env = _config(tmp_path)
    app = make_app(cfg, env=env)
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(pilot)
        text = _message(app)
        assert "No remotes found" in text
        assert str(tmp_path / ".config/lxc/config.yml") in text and str(tmp_path / "no.sock") in text
        assert "Press +" in text and "incus remote add" in text
        assert str(cfg) in text or "config.toml" in text


async def test_remote_without_instances_says_press_n(tmp_path):
    cfg, env = _config(tmp_path, '[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                                 'address = "/nonexistent/a.sock"\n')
    app = make_app(cfg, env=env, factory=lambda r, t: FakeBackend(r, instances=[]))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(pilot)
        text = _message(app)
        assert "No instances yet on alpha" in text and "Press N" in text


async def test_filter_matching_nothing_says_how_to_clear(tmp_path):
    cfg, env = _config(tmp_path, '[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                                 'address = "/nonexistent/a.sock"\n')
    app = make_app(cfg, env=env, factory=lambda r, t: FakeBackend(
        r, instances=[("web1", CT, R), ("web2", CT, R)]))
    async with app.run_test(size=(140, 40)) as pilot:
        await _settle(pilot)
        assert _message(app) == ""
        await pilot.press("slash", *"zzz")
        await _settle(pilot)
        text = _message(app)
        assert "No instance matches “zzz” (2 hidden)" in text and "esc" in text
        await pilot.press("escape")
        await _settle(pilot)
        assert _message(app) == ""


def test_permission_message_names_the_group(tmp_path):
    """The LXD/Incus error mapping names the group to join (root, as here, never gets the
    refusal from a real socket, so the mapping is checked with the error requests raises)."""
    import requests

    from backends import get_backend

    sock = tmp_path / "unix.socket"
    sock.write_text("")
    for kind, group in (("lxd", "lxd"), ("incus", "incus-admin")):
        backend = get_backend(Remote(name="local", kind=kind, address=f"unix://{sock}"),
                              timeout=3)
        err = backend.rest.map_error(requests.exceptions.ConnectionError(
            "('Connection aborted.', PermissionError(13, 'Permission denied'))"))
        assert f"group '{group}'" in err.message and "usermod" in err.message
