"""TerminalView in a headless app, driven by an in-memory echoing session."""

from __future__ import annotations

import json

from textual import events
from textual.app import App, ComposeResult

from tests.terminal.fakes import EchoSession
from tui.widgets.terminal import TerminalView


class TermApp(App):
    def __init__(self, session, **kw) -> None:
        super().__init__()
        self.session = session
        self.kw = kw
        self.messages: list = []

    def compose(self) -> ComposeResult:
        yield TerminalView(self.session, "debian-1 · console", **self.kw)

    def on_terminal_view_closed(self, message: TerminalView.Closed) -> None:
        self.messages.append(message)

    def on_terminal_view_detach_requested(self, message: TerminalView.DetachRequested) -> None:
        self.messages.append(message)

    def on_terminal_view_reconnect_requested(self, message) -> None:
        self.messages.append(message)


async def _ready(app, pilot) -> TerminalView:
    view = app.query_one(TerminalView)
    view.focus()
    await app.session.started.wait()
    await pilot.pause(0.05)
    return view


async def test_typing_sends_bytes_and_the_echo_is_drawn():
    session = EchoSession(greeting=b"login: ")
    app = TermApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        view = await _ready(app, pilot)
        await pilot.press(*"echo hi", "enter")
        await pilot.pause(0.15)
        assert session.sent_bytes == b"echo hi\r"
        assert view.emulator.screen_text()[0] == "login: echo hi"
        # What is drawn is what the emulator holds.
        assert "".join(s.text for s in view.render_line(0)).rstrip() == "login: echo hi"
        await pilot.press("ctrl+c", "up", "tab")
        await pilot.pause(0.05)
        assert session.sent_bytes.endswith(b"\x03\x1b[A\t")


async def test_application_cursor_keys_follow_the_guest():
    session = EchoSession(echo=False, greeting=b"\x1b[?1h")
    app = TermApp(session)
    async with app.run_test(size=(60, 20)) as pilot:
        await _ready(app, pilot)
        await pilot.press("up", "left")
        await pilot.pause(0.05)
        assert session.sent_bytes == b"\x1bOA\x1bOD"


async def test_query_answers_go_back_to_the_guest():
    session = EchoSession(echo=False, greeting=b"\r\n~ # \x1b[6n")
    app = TermApp(session)
    async with app.run_test(size=(60, 20)) as pilot:
        await _ready(app, pilot)
        await pilot.pause(0.05)
        assert session.sent_bytes == b"\x1b[2;5R"


async def test_resize_is_sent_to_the_session():
    session = EchoSession()
    app = TermApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        view = await _ready(app, pilot)
        await pilot.pause(0.3)
        assert session.resizes[-1] == (98, 28)  # the border takes a cell on each side
        await pilot.resize_terminal(130, 45)
        await pilot.pause(0.4)
        assert session.resizes[-1] == (128, 43)
        assert (view.emulator.columns, view.emulator.lines) == (128, 43)


async def test_paste_is_bracketed_only_when_the_guest_asked():
    session = EchoSession(echo=False)
    app = TermApp(session)
    async with app.run_test(size=(60, 20)) as pilot:
        view = await _ready(app, pilot)
        view.post_message(events.Paste("ls\nwho"))
        await pilot.pause(0.05)
        assert session.sent_bytes == b"ls\rwho"
        view.feed(b"\x1b[?2004h")
        await pilot.pause(0.05)
        session.sent.clear()
        view.post_message(events.Paste("rm -rf /tmp/x\n"))
        await pilot.pause(0.05)
        assert session.sent_bytes == b"\x1b[200~rm -rf /tmp/x\r\x1b[201~"


async def test_closed_shows_the_reason_and_posts_closed():
    session = EchoSession()
    app = TermApp(session)
    async with app.run_test(size=(80, 20)) as pilot:
        view = await _ready(app, pilot)
        view.feed(b"$ ")
        view.closed("websocket closed by the server")
        await pilot.pause(0.1)
        text = "\n".join(view.emulator.screen_text())
        assert "[console closed: websocket closed by the server — press r to reconnect]" in text
        assert [type(m) for m in app.messages] == [TerminalView.Closed]
        assert app.messages[0].reason == "websocket closed by the server"
        assert view.has_class("-closed")
        # Typing no longer reaches the (dead) session; r asks for a reconnect.
        await pilot.press("x", "r")
        await pilot.pause(0.05)
        assert session.sent_bytes == b""
        assert isinstance(app.messages[-1], TerminalView.ReconnectRequested)
        new = EchoSession()
        view.attach(new)
        await new.started.wait()
        await pilot.press("y")
        await pilot.pause(0.05)
        assert new.sent_bytes == b"y"


async def test_detach_key_posts_detach_and_sends_nothing():
    session = EchoSession()
    app = TermApp(session)
    async with app.run_test(size=(80, 20)) as pilot:
        view = await _ready(app, pilot)
        assert "ctrl+] detach" in str(view.border_title)
        await pilot.press("ctrl+right_square_bracket")
        await pilot.pause(0.05)
        assert session.sent_bytes == b""
        assert [type(m) for m in app.messages] == [TerminalView.DetachRequested]


async def test_custom_detach_key():
    session = EchoSession()
    app = TermApp(session, detach_key="ctrl+backslash")
    async with app.run_test(size=(80, 20)) as pilot:
        view = await _ready(app, pilot)
        assert "ctrl+\\ detach" in str(view.border_title)
        await pilot.press("ctrl+right_square_bracket", "ctrl+backslash")
        await pilot.pause(0.05)
        assert session.sent_bytes == b"\x1d"
        assert [type(m) for m in app.messages] == [TerminalView.DetachRequested]


async def test_scrollback_with_wheel_and_keys_and_typing_returns_to_bottom():
    session = EchoSession(echo=False)
    app = TermApp(session)
    async with app.run_test(size=(40, 12)) as pilot:
        view = await _ready(app, pilot)
        view.feed(b"".join(b"line %d\r\n" % i for i in range(100)) + b"$ ")
        await pilot.pause(0.1)
        assert view.emulator.screen_text()[-1] == "$"
        view.post_message(events.MouseScrollUp(view, 5, 5, 0, -1, 0, False, False, False))
        await pilot.pause(0.05)
        assert view.scroll_offset_lines == TerminalView.WHEEL_LINES
        assert "scrolled 3 lines" in str(view.border_subtitle)
        first = "".join(s.text for s in view.render_line(0)).strip()
        assert first == "line %d" % (100 - 9 - 3)
        await pilot.press("shift+pageup")
        await pilot.pause(0.05)
        assert view.scroll_offset_lines == 3 + view.emulator.lines - 1
        assert session.sent_bytes == b""
        await pilot.press("a")
        await pilot.pause(0.05)
        assert view.scroll_offset_lines == 0
        assert not view.border_subtitle
        assert session.sent_bytes == b"a"


async def test_drag_selects_and_copies_with_osc52():
    session = EchoSession(echo=False)
    app = TermApp(session)
    async with app.run_test(size=(40, 12)) as pilot:
        view = await _ready(app, pilot)
        view.feed(b"hello world\r\nsecond line\r\n")
        await pilot.pause(0.1)
        # Content starts at (1, 1) inside the border.
        await pilot.mouse_down(TerminalView, offset=(7, 1))
        await pilot.hover(TerminalView, offset=(7, 2))
        await pilot.mouse_up(TerminalView, offset=(7, 2))
        await pilot.pause(0.05)
        assert view.selection is not None
        assert app.clipboard == "world\nsecond"
        assert session.sent_bytes == b""


async def test_send_special_and_flood_does_not_block(tmp_path):
    session = EchoSession(echo=False)
    cast = tmp_path / "console.cast"
    app = TermApp(session, record_path=cast)
    async with app.run_test(size=(122, 42)) as pilot:
        view = await _ready(app, pilot)
        view.send_special("ctrl+c")
        view.send_special("f1")
        await pilot.pause(0.05)
        assert session.sent_bytes == b"\x03\x1bOP"
        data = b"".join(b"\x1b[01;34mdir%05d\x1b[0m  file.txt\r\n" % i for i in range(20000))
        for i in range(0, len(data), 16384):
            view.feed(data[i:i + 16384])
        for _ in range(100):
            await pilot.pause(0.05)
            if view.emulator.bytes_fed == len(data):
                break
        assert view.emulator.bytes_fed == len(data)
        assert view.emulator.screen_text()[-2].startswith("dir19999")
    lines = cast.read_text().splitlines()
    assert json.loads(lines[0])["width"] == 120
    assert "".join(json.loads(line)[2] for line in lines[1:]
                   if json.loads(line)[1] == "o").encode() == data
