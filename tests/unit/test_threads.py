"""backends/threads.py: threads started without the caller waiting for them, and the pool
built on them (the event loop's default executor and each remote's pool)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from backends import threads


@pytest.fixture
def starts(monkeypatch):
    """The names of the threads that called ``Thread.start`` (every call, in order)."""
    callers: list[str] = []
    real = threading.Thread.start

    def start(self):
        callers.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return callers


def test_start_returns_before_the_thread_is_started():
    ran = threading.Event()
    release = threading.Event()

    class SlowToStart(threading.Thread):
        def start(self):
            release.wait(5)  # the spawner waits here, not the caller
            super().start()

    began = time.monotonic()
    threads.start(SlowToStart(target=ran.set, daemon=True))
    assert time.monotonic() - began < 1
    assert not ran.is_set()
    release.set()
    assert ran.wait(5)


def test_the_pool_starts_no_thread_in_the_caller(starts):
    pool = threads.Pool(max_workers=3, thread_name_prefix="probe")
    try:
        futures = [pool.submit(threading.current_thread) for _ in range(6)]
        names = {f.result(5).name for f in futures}
    finally:
        pool.shutdown()
    assert names and all(n.startswith("probe_") for n in names)
    assert len(names) <= 3
    assert threading.current_thread().name not in starts
    assert set(starts) <= {"corral-spawner"}


def test_the_pool_runs_up_to_max_workers_at_once_and_no_more():
    pool = threads.Pool(max_workers=4, thread_name_prefix="par")
    gate = threading.Barrier(4, timeout=5)
    try:
        # four calls that each wait for the other three: only four workers at once
        # get through
        assert [f.result(10) for f in [pool.submit(gate.wait) for _ in range(4)]]
        for _ in range(5):  # one at a time: the same worker, no new ones
            pool.submit(time.sleep, 0).result(5)
        assert pool._started == 4
    finally:
        pool.shutdown()


def test_the_pool_passes_results_and_errors_on():
    pool = threads.Pool(max_workers=2)
    try:
        assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(5) == 5
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(5)
    finally:
        pool.shutdown()


def test_shutdown_cancels_what_waits_and_refuses_more():
    pool = threads.Pool(max_workers=1)
    busy = threading.Event()
    hold = threading.Event()
    first = pool.submit(lambda: (busy.set(), hold.wait(5)))
    assert busy.wait(5)
    waiting = [pool.submit(time.sleep, 0) for _ in range(3)]
    pool.shutdown(wait=False, cancel_futures=True)
    assert all(f.cancelled() for f in waiting)
    with pytest.raises(RuntimeError):
        pool.submit(time.sleep, 0)
    hold.set()
    pool.shutdown(wait=True)  # the running call ends, then its worker
    assert first.result(5) == (None, True)
    assert pool._started == 0


def test_a_loop_hands_to_thread_work_to_a_pool(starts):
    async def main():
        threads.use_on(asyncio.get_running_loop())
        name = await asyncio.to_thread(lambda: threading.current_thread().name)
        return name, list(starts)  # (asyncio.run's own end starts one: not counted)

    name, started_by = asyncio.run(main())
    assert name.startswith("corral-worker")
    assert "MainThread" not in started_by


def test_a_pool_that_cannot_start_a_thread_says_so(monkeypatch):
    real = threading.Thread.start

    def start(self):
        if self.name.startswith("doomed_"):
            raise RuntimeError("can't start new thread")
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    pool = threads.Pool(max_workers=2, thread_name_prefix="doomed")
    future = pool.submit(time.sleep, 0)
    with pytest.raises(RuntimeError, match="no thread could run it"):
        future.result(5)
    assert pool._started == 0 and pool._waiting == 0
    monkeypatch.setattr(threading.Thread, "start", real)
    assert pool.submit(lambda: 7).result(5) == 7  # the next call tries again
    pool.shutdown()
