"""Blocking work off the event loop, cancellable: the one thread runner of every backend.

A worker thread gets a :class:`Worker`: ``check()`` raises :class:`Cancelled` once the
awaiting task was cancelled, ``report(text)`` hands a progress text to the event loop
(thread-safe, deduplicated and throttled). :func:`in_thread` runs ``fn(worker, *args)``;
when the awaiting task is cancelled it sets the worker's flag and waits for the thread to
return before the cancellation goes on, so whatever cleans up afterwards never races the
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import Executor
from typing import Callable, TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """Raised inside a worker thread when its task was cancelled."""


class Worker:
    """What a worker thread gets: a cancel flag and a thread-safe ``report``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, say: Callable[[str], None] | None,
                 *, every: float = 0.0) -> None:
        self.cancel = threading.Event()
        self._loop = loop
        self._say = say
        self._every = every
        self._last = ""
        self._when = 0.0

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` when the awaiting task was cancelled."""
        if self.cancel.is_set():
            raise Cancelled()

    def report(self, text: str, force: bool = False) -> None:
        """Show ``text`` as progress (dropped when equal to the last one, or sooner than
        ``every`` seconds after it unless ``force``)."""
        if self._say is None or text == self._last:
            return
        now = time.monotonic()
        if not force and self._every and now - self._when < self._every:
            return
        self._last, self._when = text, now
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self._loop.call_soon_threadsafe(self._say, text)

    def percent(self, label: str, done: int, total: int) -> None:
        self.report(f"{label} {min(100, done * 100 // total) if total else 100}%")


async def in_thread(fn: Callable[..., T], *args: object,
                    progress: Callable[[str], None] | None = None,
                    executor: Executor | None = None, every: float = 0.0) -> T:
    """Run ``fn(worker, *args)`` in a thread (of ``executor``, else the loop's default)
    and return its result. No time-out: long transfers take as long as they take; the
    caller cancels. On cancellation the thread is told to stop and waited for.

    Raises:
        whatever ``fn`` raises (``Cancelled`` only when the task was cancelled, and then
        as ``asyncio.CancelledError``).
    """
    loop = asyncio.get_running_loop()
    worker = Worker(loop, progress, every=every)
    future = asyncio.ensure_future(loop.run_in_executor(executor, lambda: fn(worker, *args)))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        worker.cancel.set()
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({future})
        if not future.cancelled():
            future.exception()  # retrieved: it is Cancelled, or what failed meanwhile
        raise
