"""backends/dirwatch.py: directories followed by the kernel (inotify), not polled; and the
comparison of modification times it falls back on where inotify cannot be had."""

from __future__ import annotations

import asyncio
import os

from backends.dirwatch import DirWatch


async def test_entries_coming_and_going_wake_the_watcher_and_nothing_else_does(tmp_path):
    run = tmp_path / "run"
    (run / "vm1").mkdir(parents=True)
    dirs = DirWatch(every=3600)  # (a timer of an hour: only the kernel can wake it)
    try:
        assert dirs.add(run) and dirs.add(run / "vm1") and not dirs.polling
        assert not dirs.add(tmp_path / "missing") and not dirs.add(tmp_path / "run" / "x")
        waiting = asyncio.ensure_future(dirs.changed())
        (run / "vm1" / "notes").mkdir()
        assert await asyncio.wait_for(waiting, 5) == {run / "vm1" / "notes"}
        waiting = asyncio.ensure_future(dirs.changed())
        (run / "vm1" / "notes" / "deeper").mkdir()  # below a watched directory: not its entry
        os.utime(run / "vm1")  # nor a change of its times
        await asyncio.sleep(0.2)
        assert not waiting.done()
        (run / "vm1" / "qemu.pid").write_text("1")  # another corral started it
        assert await asyncio.wait_for(waiting, 5) == {run / "vm1" / "qemu.pid"}
        (run / "vm2").mkdir()
        (run / "vm2").rename(run / "vm3")
        (run / "vm1" / "qemu.pid").unlink()
        changed = await asyncio.wait_for(dirs.changed(), 5)
        assert {run / "vm2", run / "vm3", run / "vm1" / "qemu.pid"} <= changed
    finally:
        dirs.close()


async def test_a_directory_that_is_not_there_yet_is_looked_for_and_its_coming_told(tmp_path):
    later = tmp_path / "vms"
    dirs = DirWatch(every=0.05)
    try:
        assert not dirs.add(later, even_missing=True)
        waiting = asyncio.ensure_future(dirs.changed())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        later.mkdir()
        assert await asyncio.wait_for(waiting, 5) == {later}
    finally:
        dirs.close()


async def test_without_inotify_the_times_are_compared_and_it_says_so(tmp_path, monkeypatch):
    import backends.dirwatch as dirwatch

    class NoInotify:
        def inotify_init1(self, flags):
            raise OSError(24, "Too many open files")

    monkeypatch.setattr(dirwatch, "_inotify", NoInotify)
    dirs = DirWatch(every=0.05)
    assert "not available" in dirs.polling
    assert dirs.add(tmp_path)
    waiting = asyncio.ensure_future(dirs.changed())
    await asyncio.sleep(0.2)
    assert not waiting.done()
    (tmp_path / "made-outside").mkdir()
    assert await asyncio.wait_for(waiting, 5) == {tmp_path}
    dirs.close()
