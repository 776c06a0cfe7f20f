"""Leaving when the terminal goes away (an SSH connection dropped, a tmux session or a
terminal window killed).

Textual's input thread does not notice a hung-up terminal: a read returns nothing, the
next ``select`` says "readable" at once, and the app spins on a core for ever. Worse, a
corral started by ``su -c`` is in a session of its own, so the kernel's SIGHUP never
reaches it. So both are watched: SIGHUP (and SIGTERM) end the app, and a thread sleeps
in ``poll`` on the terminal asking for no event: the kernel reports ``POLLHUP`` (or
``POLLERR``) anyway, and nothing else, so the thread wakes only when the terminal is gone
(a look every half second cost two wake-ups a second for the whole run). Either way the
app exits as on ``q``
(consoles of local VMs and containers stay with their console servers), and if the exit
itself hangs on the dead terminal the process ends a few seconds later regardless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import sys
import termios
from typing import Protocol

from backends import threads

log = logging.getLogger(__name__)

GRACE = 4.0
"""Seconds a clean exit may take before the process ends anyway."""
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


class _Exits(Protocol):
    def exit(self, result: None = None, return_code: int = 0) -> None: ...


def terminal_gone(fd: int) -> bool:
    """Whether the terminal on ``fd`` has hung up (or ``fd`` is no longer open)."""
    poller = select.poll()
    try:
        poller.register(fd, 0)
        if any(mask & _GONE for _, mask in poller.poll(0)):
            return True
        termios.tcgetattr(fd)
    except termios.error:
        return True
    except (OSError, ValueError):
        return True
    return False


class HangupWatch:
    """Ends ``app`` when its terminal hangs up or it is sent SIGHUP/SIGTERM."""

    def __init__(self, app: _Exits, fd: int) -> None:
        self.app = app
        self.fd = fd
        self.reason = ""

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self.leave, f"signal {sig.name}")
        if terminal_gone(self.fd):
            self.leave("the terminal hung up")
            return
        # A daemon thread for the rest of the process (the terminal's descriptor, stdin,
        # stays open as long): nothing to stop.
        threads.run(self._watch, loop, name="corral-hangup-watch")

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        poller = select.poll()
        poller.register(self.fd, 0)  # no event asked: only a hang-up or an error wakes
        while True:
            try:
                ready = poller.poll()
            except InterruptedError:
                continue
            if any(mask & _GONE for _, mask in ready):
                with contextlib.suppress(RuntimeError):  # (the loop is closed)
                    loop.call_soon_threadsafe(self.leave, "the terminal hung up")
                return

    def leave(self, reason: str) -> None:
        if self.reason:
            return
        self.reason = reason
        log.warning("leaving: %s", reason)
        threads.timer(GRACE, lambda: os._exit(129), name="corral-hangup")
        self.app.exit(return_code=129)


def watch_hangup(app: _Exits) -> HangupWatch | None:
    """Start watching the terminal of a running app (nothing when stdin is not a
    terminal: headless tests, pipes)."""
    stream = sys.__stdin__
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        return None
    if fd < 0 or not os.isatty(fd):
        return None
    watch = HangupWatch(app, fd)
    watch.start()
    return watch
