"""Output arriving as websocket frames of any size — cut inside a UTF-8 sequence, an SGR
sequence or a CR LF — ends up on the pane exactly as if it had come in one piece: through
corral's WebSocketSession (a real websocket server on a unix socket), the output pump and
the emulator's fast path, against the parser alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import NamedTuple

from rich.segment import Segment

from textual.app import App, ComposeResult
from websockets.asyncio.client import unix_connect
from websockets.asyncio.server import unix_serve

from backends.console.client import WebSocketSession
from tui.terminal.emulator import TerminalEmulator
from tui.widgets.terminal import TerminalView

CORPUS = Path(__file__).resolve().parent / "corpus"


class Pane(NamedTuple):
    """What a pane held once all output arrived (before the session was closed, which
    writes on the screen)."""

    state: tuple
    screen_text: list[str]
    first_row: list[Segment]
    rendered: list[str]
    history_size: int


async def _through_a_websocket(tmp_path: Path, frames: list[bytes]) -> Pane:
    """A 120x40 pane fed ``frames`` by a websocket server."""
    sock = str(tmp_path / "ws.sock")
    total = sum(map(len, frames))
    done = asyncio.Event()

    async def handler(ws) -> None:
        for frame in frames:
            await ws.send(frame)
        await done.wait()  # open until the pane was read

    session = WebSocketSession("test console", lambda: unix_connect(
        sock, "ws://localhost/", max_size=None, compression=None))

    class Console(App):
        def compose(self) -> ComposeResult:
            yield TerminalView(session, "test · console")

    async with unix_serve(handler, sock, max_size=None, compression=None):
        app = Console()
        async with app.run_test(size=(122, 42)) as pilot:
            view = app.query_one(TerminalView)
            emulator = view.emulator
            async with asyncio.timeout(60):
                while emulator.bytes_fed < total or len(view._output):
                    await asyncio.sleep(0.01)
            await pilot.pause()
            pane = Pane(emulator.state(), emulator.screen_text(),
                        emulator.render_view_line(0, cursor=False),
                        [view.render_line(y).text for y in range(40)],
                        emulator.history_size)
            done.set()
    return pane


def _reference(data: bytes) -> TerminalEmulator:
    emu = TerminalEmulator(120, 40, fast_path=False)
    emu.feed(data)
    return emu


def _cut(data: bytes, at: list[int]) -> list[bytes]:
    edges = [0, *at, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:]) if b > a]


async def test_sequences_cut_between_frames_are_put_together(tmp_path):
    data = ("plain \x1b[01;34mblue\x1b[0m é中文 ✓\r\n" * 3 + "last \x1b[7mrev\x1b[0m").encode()
    cuts = [data.index(b"\x1b[01;34m") + 3,  # inside the SGR sequence
            data.index("é".encode()) + 1,  # between the two bytes of é
            data.index("中".encode()) + 2,  # inside a three-byte character
            data.index(b"\r\n") + 1]  # between CR and LF
    frames = _cut(data, sorted(cuts))
    pane = await _through_a_websocket(tmp_path, frames)
    ref = _reference(data)
    assert pane.state == ref.state()
    assert pane.screen_text[0] == "plain blue é中文 ✓"
    blue = [s for s in pane.first_row if s.text == "blue"]
    assert blue and blue[0].style.bold


async def test_a_flood_in_small_frames_is_the_same_as_in_one_piece(tmp_path):
    data = (CORPUS / "ls_color.bin").read_bytes() * 3
    frames = _cut(data, list(range(4096, len(data), 4096)))
    pane = await _through_a_websocket(tmp_path, frames)
    ref = _reference(data)
    assert pane.state == ref.state()
    assert pane.history_size > 1000
    # What the pane draws (rows the fast path laid out are drawn from their runs) is what
    # the parser's screen draws.
    for y in range(40):
        want = "".join(s.text for s in ref.render_view_line(y, cursor=False))
        assert pane.rendered[y].rstrip() == want.rstrip(), y
