"""backends.steps.Steps: a failure or a cancellation runs the undos registered so far, newest
first, once each, whatever an undo does; success undoes nothing. (Each procedure built on
it has its own test on the real daemons that a failure there leaves nothing.)"""

from __future__ import annotations

import asyncio

import pytest

from backends.errors import OperationFailed
from backends.steps import Steps


async def test_a_failure_runs_the_undos_newest_first():
    made: list[str] = []

    async def remove(name: str) -> None:
        made.remove(name)

    with pytest.raises(OperationFailed, match="third"):
        async with Steps() as steps:
            made.append("dir")
            steps.undo("the directory", lambda: remove("dir"))
            made.append("disk")
            steps.undo("the disk", lambda: made.remove("disk"))  # a plain function too
            raise OperationFailed("the third step failed")
    assert made == []
    assert steps.undone == ["the disk", "the directory"]


async def test_success_undoes_nothing_and_keep_drops_the_undos():
    ran: list[str] = []
    async with Steps() as steps:
        steps.undo("a", lambda: ran.append("a"))
    assert ran == [] and steps.undone == []
    with pytest.raises(ValueError):
        async with Steps() as steps:
            steps.undo("a", lambda: ran.append("a"))
            steps.keep()  # what was made is the caller's now
            steps.undo("b", lambda: ran.append("b"))
            raise ValueError("later")
    assert ran == ["b"]


async def test_a_failing_undo_does_not_stop_the_others_and_the_first_error_shows():
    ran: list[str] = []

    def broken() -> None:
        raise OSError("undo broke")

    with pytest.raises(OperationFailed, match="the step"):
        async with Steps() as steps:
            steps.undo("first", lambda: ran.append("first"))
            steps.undo("broken", broken)
            steps.undo("last", lambda: ran.append("last"))
            raise OperationFailed("the step")
    assert ran == ["last", "first"]
    assert [name for name, _ in steps.failed_undos] == ["broken"]


async def test_a_cancelled_procedure_is_undone_even_when_cancelled_again():
    """The caller cancels while a step waits; cancelling again while the undo runs does
    not stop the undo (it finishes), and the task ends cancelled."""
    undo_started, undo_may_end = asyncio.Event(), asyncio.Event()
    undone: list[str] = []
    step_waits = asyncio.Event()

    async def slow_undo() -> None:
        undo_started.set()
        await undo_may_end.wait()
        undone.append("made")

    async def procedure() -> None:
        async with Steps() as steps:
            steps.undo("made", slow_undo)
            step_waits.set()
            await asyncio.Event().wait()  # a step that never ends by itself

    task = asyncio.ensure_future(procedure())
    await step_waits.wait()
    task.cancel()
    await undo_started.wait()
    task.cancel()  # again, while undoing
    with pytest.raises(asyncio.CancelledError):
        await task
    assert undone == []  # still running in the background
    undo_may_end.set()
    while not undone:
        await asyncio.sleep(0)
    assert undone == ["made"]
