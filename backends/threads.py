"""Threads started without waiting for them: the event loop (and the start-up, before it)
never sleeps until a new thread has run.

``threading.Thread.start()`` returns only once the new thread has run its first lines,
and that thread needs the GIL for it. At start, while listings are parsed, a backend is
imported and the UI is built (every core busy), the new thread waited 50-180 ms for the
GIL, and the loop waited with it: keys, repaints and every connection stood still. Each
thread pool the loop hands work to starts its workers on its first calls: the same wait,
again and again. (asyncio's own thread per subprocess, which waits for its exit, still
starts that way: a few at start, for the local tools' versions.)

Here one long-lived *spawner* thread calls ``start()``; whoever asks only queues the
thread (:func:`start`). :class:`Pool` is an executor whose workers are started that way;
the loop's default executor is one (:func:`use_on`), so is each remote's own pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Failed = Callable[[BaseException], object]
_spawn_queue: queue.SimpleQueue[tuple[threading.Thread, Failed | None]] = queue.SimpleQueue()
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _spawn_forever() -> None:
    while True:
        thread, failed = _spawn_queue.get()
        try:
            thread.start()
        except Exception as e:  # out of threads (or shutting down): its owner is told
            log.exception("could not start thread %s", thread.name)
            if failed is not None:
                try:
                    failed(e)
                except Exception:
                    log.exception("after thread %s could not start", thread.name)


def start(thread: threading.Thread, failed: Failed | None = None) -> threading.Thread:
    """Start ``thread`` soon, from the spawner thread, without waiting for it to run (the
    first call starts the spawner, and waits for that one only). ``failed(error)`` is
    called (in the spawner) if it cannot be started."""
    global _spawner
    if _spawner is None:
        with _spawner_lock:
            if _spawner is None:
                spawner = threading.Thread(target=_spawn_forever, name="corral-spawner",
                                           daemon=True)
                spawner.start()
                _spawner = spawner
    _spawn_queue.put((thread, failed))
    return thread


def run(target: Callable[..., object], *args: Any, name: str,
        failed: Failed | None = None) -> threading.Thread:
    """A daemon thread running ``target(*args)``, started by :func:`start`."""
    return start(threading.Thread(target=target, args=args, name=name, daemon=True), failed)


def timer(delay: float, function: Callable[[], object], *, name: str) -> threading.Timer:
    """``function()`` in a thread of its own after ``delay`` seconds (``cancel()`` it),
    started by :func:`start`."""
    t = threading.Timer(delay, function)
    t.name, t.daemon = name, True
    start(t)
    return t


_STOP = object()


class Pool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool like :class:`concurrent.futures.ThreadPoolExecutor` (daemon workers,
    kept once started, at most ``max_workers``) whose workers are started by :func:`start`:
    ``submit`` never waits for a thread. (A subclass only because asyncio takes nothing
    else as a loop's default executor: none of the base class's machinery is used.)"""

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "pool"
                 ) -> None:
        self._limit = max_workers or min(32, (os.cpu_count() or 1) + 4)  # (the base's)
        super().__init__(self._limit, thread_name_prefix)
        self._prefix = thread_name_prefix
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._state = threading.Lock()
        self._started = 0
        """Workers started (or queued for the spawner) and not ended."""
        self._waiting = 0
        """Workers waiting for a job (or started and about to)."""
        self._queued = 0
        """Jobs submitted that no worker has taken yet."""
        self._closed = False
        self._ended = threading.Condition(self._state)
        self._numbers = itertools.count()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
               ) -> concurrent.futures.Future[Any]:
        with self._state:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._jobs.put((future, fn, args, kwargs))
            self._queued += 1
            if self._queued > self._waiting and self._started < self._limit:
                self._started += 1
                self._waiting += 1  # (from now: it takes a job once it runs)
                run(self._work, name=f"{self._prefix}_{next(self._numbers)}",
                    failed=self._not_started)
            return future

    def _work(self) -> None:
        new = True
        try:
            while True:
                if not new:
                    with self._state:
                        self._waiting += 1
                new = False
                job = self._jobs.get()
                with self._state:
                    self._waiting -= 1
                    if job is _STOP:
                        return
                    self._queued -= 1
                future, fn, args, kwargs = job
                result = None
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as e:
                        future.set_exception(e)
                    else:
                        future.set_result(result)
                del job, future, fn, args, kwargs, result  # nothing kept while waiting
        finally:
            with self._state:
                self._started -= 1
                self._ended.notify_all()

    def _not_started(self, error: BaseException) -> None:
        """A worker could not be started: the next call tries again; with no worker at
        all, the calls waiting fail with the reason instead of waiting for ever."""
        with self._state:
            self._started -= 1
            self._waiting -= 1
            self._ended.notify_all()
            stranded = []
            while not self._started:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not _STOP:
                    self._queued -= 1
                    stranded.append(job[0])
        for future in stranded:
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError(f"no thread could run it: {error}"))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._state:
            if not self._closed:
                self._closed = True
                if cancel_futures:
                    while True:
                        try:
                            job = self._jobs.get_nowait()
                        except queue.Empty:
                            break
                        job[0].cancel()
                        self._queued -= 1
                for _ in range(self._started):
                    self._jobs.put(_STOP)  # after the jobs still queued
            if wait:
                self._ended.wait_for(lambda: self._started == 0)


def use_on(loop: asyncio.AbstractEventLoop) -> None:
    """Give ``loop`` a :class:`Pool` as its default executor (``asyncio.to_thread``)."""
    loop.set_default_executor(Pool(thread_name_prefix="corral-worker"))
