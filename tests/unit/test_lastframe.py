"""The last frame (tui/lastframe.py): saved dimmed and marked, used only for the same start
(terminal size, TERM, config and its mtime, --theme, --remote), only from a private file of
this user, and only when it holds nothing but text and CSI sequences."""

from __future__ import annotations

import json
import os
import time

import pytest

from tui import lastframe

SIZE = os.terminal_size((80, 24))


@pytest.fixture
def spot(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "TERM": "xterm-256color"}
    return env, config, lastframe.frame_path(env, config)


def test_saved_dimmed_and_marked_then_loaded_for_the_same_start(spot):
    env, config, path = spot
    key = lastframe.key(env, config, SIZE, None, None)
    lastframe.save(path, key, "\x1b[1;1H\x1b[38;5;188;48;5;23mweb1\x1b[0m running\n\x1b[mx")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    frame = lastframe.load(path, key)
    assert "\x1b[38;5;188;48;5;23;2mweb1\x1b[0;2m running" in frame
    assert "\x1b[2mx" in frame  # a bare reset dims too
    assert lastframe.MARK in frame and frame.index("\x1b[1;57H") < frame.index(lastframe.MARK)
    assert frame.index(lastframe.MARK) < frame.index("\n")  # before any other row


@pytest.mark.parametrize("change", ["size", "term", "theme", "remotes", "config"])
def test_another_start_does_not_use_it(spot, change):
    env, config, path = spot
    lastframe.save(path, lastframe.key(env, config, SIZE, None, None), "web1")
    size, theme, remotes = SIZE, None, None
    if change == "size":
        size = os.terminal_size((81, 24))
    elif change == "term":
        env = dict(env, TERM="screen")
    elif change == "theme":
        theme = "corral-light"
    elif change == "remotes":
        remotes = ["local"]
    else:
        st = config.stat()
        os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert lastframe.load(path, lastframe.key(env, config, size, theme, remotes)) is None


@pytest.mark.parametrize("hostile", [
    "\x1b]0;owned\x07",          # OSC: sets the window title (or worse, elsewhere)
    "\x1bP+q544e\x1b\\",          # DCS: a query the terminal answers as typed input
    "\x9b31m",                    # C1 CSI
    "\x07", "\x1b7", "\x00",
    "\x1b[6n", "\x1b[c", "\x1b[21t",  # make the terminal answer, as typed input
    "\x1b[?1000h", "\x1b[5i", "\x1b[8;1;1t",  # change its modes or its size
])
def test_anything_but_text_and_csi_is_not_written(spot, hostile):
    env, config, path = spot
    key = lastframe.key(env, config, SIZE, None, None)
    lastframe.save(path, key, f"web1 {hostile} web2")
    assert lastframe.load(path, key) is None


def test_only_a_private_regular_file_of_this_user(spot, tmp_path):
    env, config, path = spot
    key = lastframe.key(env, config, SIZE, None, None)
    lastframe.save(path, key, "web1")
    path.chmod(0o644)
    assert lastframe.load(path, key) is None
    path.chmod(0o600)
    assert lastframe.load(path, key) is not None
    other = tmp_path / "elsewhere.ansi"
    other.write_text(json.dumps(key, separators=(",", ":")) + "\nweb1")
    other.chmod(0o600)
    path.unlink()
    path.symlink_to(other)
    assert lastframe.load(path, key) is None


def test_not_painted_without_a_terminal(spot, monkeypatch):
    env, config, path = spot
    lastframe.save(path, lastframe.key(env, config, SIZE, None, None), "web1")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert lastframe.paint(env, config, None, None) is None


def test_a_fifo_or_a_mangled_header_is_not_read(spot):
    env, config, path = spot
    key = lastframe.key(env, config, SIZE, None, None)
    path.parent.mkdir(parents=True)
    os.mkfifo(path, 0o600)
    assert lastframe.load(path, key) is None  # at once: nobody writes to it
    path.unlink()
    path.write_bytes(b"[" * 100000 + b"\nweb1")
    path.chmod(0o600)
    assert lastframe.load(path, key) is None


def test_the_ui_puts_back_the_modes_from_before_the_frame():
    assert lastframe.ui_started() is None  # no frame: the driver keeps what it found
    painted = lastframe.Painted(-1, ["the modes before"])
    lastframe._painted = painted
    try:
        assert lastframe.ui_started() == ["the modes before"] and painted.ui_ran
        assert lastframe.ui_started() == ["the modes before"]  # after a suspend too
    finally:
        lastframe._painted = None


def _delivered(fd: int, count: int) -> None:
    """Wait until ``count`` bytes typed on a pty wait for its reader: the kernel hands
    what the master writes to the line discipline in a moment of its own (on a busy host,
    after the next line of the test has run). A cooked terminal counts whole lines."""
    deadline = time.monotonic() + 10
    while lastframe._pending(fd) < count:
        assert time.monotonic() < deadline, "the pty never delivered what was typed"
        time.sleep(0.005)


def test_an_enter_typed_before_corral_took_the_terminal_is_an_enter(spot, monkeypatch):
    """`tmux send-keys '/web' Enter j` the moment the command starts: Python is still
    starting, the terminal still cooks the input, and its ICRNL makes the Enter a newline
    (Textual's ctrl+j: the filter was never submitted, and the j went into it). The bytes
    waiting when corral takes the terminal are counted, and the driver reads their
    newlines as the Enter they were typed as; what is typed afterwards is left alone."""
    import pty
    import termios

    env, config, _path = spot
    master, slave = pty.openpty()
    try:
        assert termios.tcgetattr(slave)[0] & termios.ICRNL  # a terminal's default
        os.write(master, b"/web\rj\r")
        _delivered(slave, 7)  # (a pty hands written bytes to its reader a moment later)
        with open(slave, "r", closefd=False) as stdin, open(slave, "w", closefd=False) as out:
            monkeypatch.setattr("sys.stdin", stdin)
            monkeypatch.setattr("sys.stdout", out)
            painted = lastframe.paint(env, config, None, None)
            assert painted is not None
            try:
                os.write(master, b"\r")  # typed once corral has the terminal: a CR
                cooked = lastframe.take_cooked()
                assert cooked == 7 and lastframe.take_cooked() == 0  # asked once
                read, left = lastframe.uncook(os.read(slave, 3), cooked)  # in pieces
                while len(read) < 8:  # (the pty hands the last CR over a moment later)
                    more, left = lastframe.uncook(os.read(slave, 100), left)
                    read += more
                assert (read, left) == (b"/web\rj\r\r", 0)
            finally:
                painted.done()
    finally:
        os.close(master)
        os.close(slave)
