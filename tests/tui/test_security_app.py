"""What the UI does for safety, on the in-memory FakeBackend (fast Pilot tests).

Text from daemons, guests and users is never read as Textual markup: instance names,
daemon messages and errors full of ``[/]``, ``[@click=app.quit]`` and ``[bold]`` are shown
as they are, in the table, the details pane, dialogs, notifications and the palette, and
nothing crashes (a ``MarkupError`` would end corral); a structure check keeps every Static
and Label plain. The remotes pane warns of an unpinned remote and a readable client key."""

from __future__ import annotations

import ast
import html
import os
import re
import sys
from pathlib import Path

from textual.content import Content
from textual.widgets._toast import Toast

from backends.errors import OperationFailed
from backends.fake import FakeBackend
from backends.models import InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.screens.dialogs import ChoiceDialog, ConfirmDialog
from tui.widgets.instance_table import InstanceTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fake_app import select

R, S = InstanceStatus.RUNNING, InstanceStatus.STOPPED
CT = InstanceType.CONTAINER
HOSTILE = ("[/]", "[@click=app.quit]x", "[bold]web", "[link=file:///etc/shadow]z")


def fake_env(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        '[[remote]]\nname = "alpha"\nkind = "lxd"\naddress = "/nonexistent/a.sock"\n')
    backends = {}

    class Hostile(FakeBackend):
        async def freeze(self, ref):
            raise OperationFailed(f"chpasswd: [/] failed for {ref} [@click=app.quit]go[/]")

    def factory(remote: Remote, timeout: float):
        specs = [(name, CT, R) for name in HOSTILE] + [("[dim]off", CT, S)]
        backends[remote.name] = Hostile(remote, instances=specs,
                                        hang_on_stop={"[/]"})
        return backends[remote.name]

    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return cfg, env, factory, backends


async def settle(pilot):
    for _ in range(6):
        await pilot.pause(0.05)


def screen_text(app) -> str:
    """What the screen shows, as text (the screenshot without its SVG)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def shown(widget) -> str:
    """The text a widget shows, as plain text."""
    rendered = widget.render()
    return getattr(rendered, "plain", str(rendered))


async def test_markup_in_names_and_messages_is_shown_as_text(tmp_path):
    cfg, env, factory, backends = fake_env(tmp_path)
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(150, 45), notifications=True) as pilot:
        await settle(pilot)
        table = app.screen.query_one(InstanceTable)
        names = {str(ref) for ref in table.refs.values()}
        assert names == {f"alpha:{n}" for n in (*HOSTILE, "[dim]off")}
        app.screen.action_toggle_details()
        for name in HOSTILE:  # each row, with the details pane and its title
            select(app, f"alpha:{name}")
            await settle(pilot)
        details = app.screen.query_one("#details")
        # the title reads back as markup that shows the name as it is
        assert Content.from_markup(details.border_title).plain == \
            "Details: alpha:[link=file:///etc/shadow]z"
        assert "[link=file:///etc/shadow]z" in shown(details.query_one("#details-overview"))
        svg = screen_text(app)
        # (the name column, at this width, cuts the long one after "[@click=ap")
        assert "[bold]web" in svg and "│ [@click=ap" in svg

        # a daemon's refusal, as a notification
        select(app, "alpha:[bold]web")
        await pilot.press("p")  # pause (freeze): the daemon answers with markup
        await settle(pilot)
        messages = [str(n.message) for n in app._notifications]
        assert any("chpasswd: [/] failed for alpha:[bold]web [@click=app.quit]go[/]" in m
                   for m in messages), messages
        # widgets and screens notify through the app too: plain as well
        app.screen.notify("guest says [/] and [@click=app.quit]quit[/]")
        app.screen.query_one(InstanceTable).notify("[bold]not bold")
        await settle(pilot)
        toasts = " ".join(shown(t) for t in app.screen.query(Toast))
        assert "chpasswd: [/] failed" in toasts
        assert "[@click=app.quit]quit[/]" in toasts and "[bold]not bold" in toasts

        # a dialog quoting a name and the daemon's words
        select(app, "alpha:[/]")
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert "alpha:[/]" in shown(app.screen.query_one("#dialog-message")) or \
            "alpha:[/]" in shown(app.screen.query_one("#dialog-title"))
        await pilot.click("#confirm")
        await settle(pilot)
        assert backends["alpha"].calls[-1] == ("stop", "[/]", {"force": True})

        # dialogs with choices named by a daemon
        app.push_screen(ChoiceDialog("Pool [/]", [("a", "[bold]pool"), ("b", "[/]")],
                                     note="from [@click=app.quit]x"))
        await settle(pilot)
        assert "[bold]pool" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)

        # the command palette lists "… alpha:[/]" entries: typed and browsed
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"click")
        await pilot.pause(0.5)
        assert "[@click=app.quit]x" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert app.is_running and app.return_code is None


def test_every_static_and_label_is_plain():
    """A ``Static`` or ``Label`` that reads markup is one daemon message away from a crash:
    each one in tui/ passes ``markup=False`` (formatting goes in rich ``Text``)."""
    root = Path(__file__).resolve().parents[2] / "tui"
    missing = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("Static", "Label") and \
                    not any(k.arg == "markup" for k in node.keywords):
                missing.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert missing == []


async def test_the_remotes_pane_warns_of_an_unpinned_remote(tmp_path):
    """A ``[[remote]]`` over HTTPS without ``server_cert`` (and with a client key others
    can read) is flagged under the remotes list; a pinned one is not."""
    key = tmp_path / "client.key"
    key.write_text("not a real key\n")
    os.chmod(key, 0o644)
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        '[[remote]]\nname = "open"\nkind = "lxd"\naddress = "https://127.0.0.1:1"\n'
        f'client_cert = "{key}"\nclient_key = "{key}"\n')
    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    app = make_app(cfg, env=env, factory=lambda remote, timeout: FakeBackend(remote))
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot)
        info = shown(app.screen.query_one("#remote-info"))
        assert "not pinned" in info and "readable by other users (mode 0644)" in info
