"""A procedure as named steps with one undo on failure.

A creation or copy makes things one after another (an operation offered, an instance on
the target, a directory, a disk); when a later step fails, or the caller cancels, what the
earlier steps made must go again, newest first. Each step registers its own undo right
where it makes something, so the undo sits next to what it undoes and the procedure has one
place that unwinds:

    async with Steps() as steps:
        op = await offer()
        steps.undo("the offer", lambda: cancel(op))
        await pull(op)

On leaving the block with an exception (cancellation included) the registered undos run in
reverse order, shielded from a second cancellation; an undo that fails does not stop the
others, and the procedure's own exception is the one that propagates. On success nothing
is undone. :meth:`Steps.keep` drops the undos early (what is made is the caller's now).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)

Undo = Callable[[], "Awaitable[Any] | Any"]
"""A function that removes what a step made; it may be a coroutine function. Blocking
work belongs in a thread (``lambda: asyncio.to_thread(...)``): undos run on the loop."""


class Steps:
    """The undos of one procedure's steps so far (an async context manager)."""

    def __init__(self) -> None:
        self._undos: list[tuple[str, Undo]] = []
        self.undone: list[str] = []
        """The names of the undos that ran, in the order they ran (for messages, tests)."""
        self.failed_undos: list[tuple[str, BaseException]] = []

    def undo(self, name: str, fn: Undo) -> None:
        """Register how to remove what the step called ``name`` just made."""
        self._undos.append((name, fn))

    def keep(self) -> None:
        """Everything made so far stays: nothing will be undone."""
        self._undos.clear()

    async def rollback(self) -> None:
        """Run the registered undos, newest first, each at most once. A second
        cancellation while they run does not stop them (they finish in the background)."""
        undos, self._undos = list(reversed(self._undos)), []
        if undos:
            await asyncio.shield(asyncio.ensure_future(self._run(undos)))

    async def _run(self, undos: list[tuple[str, Undo]]) -> None:
        for name, fn in undos:
            self.undone.append(name)
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception as e:  # the procedure's own error is the one to show
                log.warning("undoing %s failed: %s: %s", name, type(e).__name__, e)
                self.failed_undos.append((name, e))

    async def __aenter__(self) -> Steps:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> bool:
        if exc_type is None:
            self.keep()
            return False
        try:
            await self.rollback()
        except asyncio.CancelledError:
            if exc_type is not asyncio.CancelledError:
                raise
        return False
