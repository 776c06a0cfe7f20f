"""Textual's Linux driver, without its ten wake-ups a second.

Textual's input thread waits for the terminal with ``select(…, 0.1)``: it wakes up ten
times a second only to see whether it should stop, and half of corral's CPU at rest went
there. This driver's input thread waits as long as nothing happens: until a key, the
terminal hanging up (readable, and the read returns nothing), or a byte on its own wake-up
pipe, which :meth:`QuietLinuxDriver.disable_input` writes before it stops the thread.
It still wakes up on time while the key parser has an unfinished sequence to time out
(a lone ``Esc``): the parser's own deadline. The parser and its deadline are private parts
of Textual, reached through :mod:`tui._textual_compat`.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from collections.abc import Callable, Iterator

from textual import events
from textual.drivers.linux_driver import LinuxDriver

from . import lastframe
from ._textual_compat import ParseError, key_name, key_parser, parser_deadline


ESC = "\x1b"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
INTRODUCERS = frozenset("[]_^\\")
"""What follows Esc to begin a sequence the terminal sends (CSI, OSC, APC, PM, and ST
that ends them), not a key typed after Esc."""


class AltKeys:
    """Esc then a punctuation key, in one read, as the key Alt+that key.

    A terminal sends Alt+``:`` as Esc ``:``, and Esc then ``:`` typed fast (or sent by
    ``tmux send-keys Escape :``) arrive the same way. Textual's parser names Esc then a
    letter ``alt+x``, which the app then takes apart (tui/keyboard.py ``KeyGate.unalt``),
    but Esc then anything else (``:``, ``/``, space, ``?``) it names as the second key
    alone: the Esc is lost, and ``:`` meant for a command line is typed into the filter
    the Esc would have left. :meth:`pieces` cuts a read where Esc meets such a key (not
    inside a bracketed paste, not where a sequence begins) so that it becomes one
    ``alt+`` key, named as Textual names that key alone, with its character."""

    def __init__(self, name_of: Callable[[str], str]) -> None:
        self._name_of = name_of
        self.pasting = False
        """Inside a bracketed paste: its text is text, Esc included."""

    def pieces(self, data: str) -> Iterator[str | events.Key]:
        """``data`` as text for the parser and ``alt+`` keys, in order. A lone Esc just
        before such a key (Esc Esc ``:``) is an Esc key by itself."""
        start = i = 0
        while (j := data.find(ESC, i)) >= 0 and j + 1 < len(data):
            if data.startswith(PASTE_START, j) or data.startswith(PASTE_END, j):
                self.pasting = data.startswith(PASTE_START, j)
                i = j + len(PASTE_START)
                continue
            char = data[j + 1]
            if self.pasting or not char.isprintable() or char.isalnum() \
                    or char in INTRODUCERS:
                i = j + 1
                continue
            text = data[start:j]
            lone = len(text) - len(text.rstrip(ESC))
            if text[:len(text) - lone]:
                yield text[:len(text) - lone]
            for _ in range(lone):
                yield events.Key("escape", ESC)
            yield events.Key(f"alt+{self._name_of(char)}", char)
            start = i = j + 2
        if data[start:]:
            yield data[start:]


class QuietLinuxDriver(LinuxDriver):
    """:class:`LinuxDriver` whose input thread sleeps until there is input."""

    _wake_r = -1
    _wake_w = -1

    def start_application_mode(self) -> None:
        if self._wake_r < 0:
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._drain()
        super().start_application_mode()
        before = lastframe.ui_started()
        if before is not None:  # the start's type-ahead modes: not what to put back
            self.attrs_before = before

    def _drain(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def disable_input(self) -> None:
        if not self.exit_event.is_set() and self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")  # the thread wakes up and sees exit_event
            except OSError:
                pass
        super().disable_input()
        self._drain()

    def close(self) -> None:
        super().close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events (as Textual's, but waiting without a
        period)."""
        selector = selectors.SelectSelector()
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        if self._wake_r >= 0:
            selector.register(self._wake_r, selectors.EVENT_READ)
        parser = key_parser(self)
        feed, tick = parser.feed, parser.tick
        alt = AltKeys(key_name)
        decode = getincrementaldecoder("utf-8")().decode
        cooked = lastframe.take_cooked()  # typed before corral took the terminal

        def process(events: list[tuple[selectors.SelectorKey, int]],
                    final: bool = False) -> None:
            nonlocal cooked
            for key, mask in events:
                if key.fd != fileno or not mask & selectors.EVENT_READ:
                    continue
                raw, cooked = lastframe.uncook(os.read(fileno, 1024 * 4), cooked)
                data = decode(raw, final=final)
                if not data:
                    break  # stdin at its end (tui/hangup.py notices a hung-up terminal)
                for piece in alt.pieces(data):
                    if isinstance(piece, str):
                        for event in feed(piece):
                            self.process_message(event)
                    else:
                        self.process_message(piece)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(parser_deadline(parser)))
            selector.unregister(fileno)
            process(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:
                for _ in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
