"""The last frame, as a user sees it: the real ``corral`` command in a real tmux session
quits, and the next start shows that screen dimmed and marked ``last run · refreshing…``
before Textual paints over it; the terminal's modes are the shell's again afterwards, and
``warm_start = false`` keeps no frame."""

from __future__ import annotations

import subprocess
import time

import pytest

from .test_hangup import CORRAL


@pytest.fixture
def run(tmp_path):
    """A shell script starting corral (no remotes) and recording ``stty`` after it."""
    if subprocess.run(["which", "tmux"], capture_output=True).returncode:
        pytest.fail("tmux is not installed (run scripts/setup-lab.sh)", pytrace=False)
    config = tmp_path / "config.toml"
    config.write_text("[qemu]\nenabled = false\n[lxc]\nenabled = false\n")
    for d in ("lxc", "incus", "cache"):
        (tmp_path / d).mkdir()
    script = tmp_path / "run.sh"
    script.write_text(
        f"#!/bin/sh\nexport CORRAL_CONFIG_FILE={config} LXD_CONF={tmp_path}/lxc "
        f"INCUS_CONF={tmp_path}/incus XDG_CACHE_HOME={tmp_path}/cache "
        f"LXD_SOCKET={tmp_path}/none.sock INCUS_SOCKET={tmp_path}/none2.sock\n"
        f"{CORRAL}\nstty -a > {tmp_path}/stty.txt\nsleep 30\n")
    script.chmod(0o755)
    return script, config, tmp_path / "cache" / "corral", tmp_path / "stty.txt"


class Pane:
    def __init__(self, script) -> None:
        self.tmux = ["tmux", "-L", f"corral-lastframe-{time.monotonic_ns()}"]
        subprocess.run([*self.tmux, "new-session", "-d", "-s", "s", "-x", "120", "-y", "30",
                        str(script)], check=True)

    def screen(self) -> str:
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-t", "s"],
                              capture_output=True, text=True).stdout

    def until(self, predicate, what: str, timeout: float = 30, step: float = 0.05) -> str:
        deadline = time.monotonic() + timeout
        while not predicate(text := self.screen()):
            assert time.monotonic() < deadline, f"{what}: {text!r}"
            time.sleep(step)
        return text

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "s", *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, check=False)


def quit_corral(pane: Pane, stty) -> None:
    pane.until(lambda s: "Instances" in s and "last run" not in s, "corral did not start")
    pane.keys("q")
    deadline = time.monotonic() + 20
    while not stty.exists():
        assert time.monotonic() < deadline, "corral did not quit on q"
        time.sleep(0.1)


def run_once(script, stty) -> None:
    """corral started in a pane of its own and quit with q: its last frame is kept."""
    pane = Pane(script)
    try:
        quit_corral(pane, stty)
    finally:
        pane.close()


def test_the_last_screen_comes_first_marked_then_the_live_one(run):
    script, _, cache, stty = run
    run_once(script, stty)
    frames = list(cache.glob("frame-*.ansi"))
    assert len(frames) == 1 and frames[0].stat().st_mode & 0o777 == 0o600
    shell_modes = stty.read_text()
    stty.unlink()

    pane = Pane(script)
    try:
        # the mark comes right after the top line: no rows are ever shown without it
        first = pane.until(lambda s: "Instances" in s, "nothing on the screen", step=0.005)
        assert "last run · refreshing…" in first
        # nothing in it reads as live: no key hints (the footer says why), no state. (The
        # frame reaches the terminal in the pty's chunks, top line first: on a busy machine
        # a look can come before its last line; the whole of it is on the screen before
        # the live UI paints over it.)
        whole = pane.until(lambda s: "keys work as soon as corral is up" in s
                           or "last run" not in s, "the last frame was not painted whole",
                           step=0.005)
        assert "last run · refreshing…" in whole, "the live UI came before the footer"
        assert "Quit" not in whole and "connected" not in whole
        pane.until(lambda s: "Instances" in s and "last run" not in s,
                   "Textual did not paint over the last frame")
        quit_corral(pane, stty)
    finally:
        pane.close()
    after = stty.read_text()
    assert " echo " in f" {after} " and " icanon " in f" {after} "
    assert after == shell_modes


def test_no_frame_is_kept_with_warm_start_off(run):
    script, config, cache, stty = run
    pane = Pane(script)
    try:
        quit_corral(pane, stty)
    finally:
        pane.close()
    assert list(cache.glob("frame-*.ansi"))
    config.write_text(config.read_text() + "[ui]\nwarm_start = false\n")
    stty.unlink()
    pane = Pane(script)
    try:
        quit_corral(pane, stty)  # the frame's config mtime differs: not painted either
    finally:
        pane.close()
    assert not list(cache.glob("frame-*.ansi"))


def test_keys_typed_on_the_last_frame_reach_the_live_screen(run):
    """A burst typed while the last frame is on the screen (as an admin types the moment
    something appears) is replayed, in order, into the live UI."""
    script, _, cache, stty = run
    run_once(script, stty)
    stty.unlink()
    pane = Pane(script)
    try:
        first = pane.until(lambda s: "Instances" in s, "nothing on the screen", step=0.005)
        assert "last run" in first
        pane.keys("/zq9", "Enter")  # one write; the q must not quit, it is filter text
        live = pane.until(lambda s: "zq9" in s and "last run" not in s,
                          "the keys typed on the last frame did not reach the filter")
        assert "Instances (0/0)" in live or "zq9" in live
        time.sleep(0.5)
        assert not stty.exists(), "a key typed into the filter quit corral"
        pane.keys("Escape")
        time.sleep(0.3)  # a lone Esc followed at once by q would be alt+q
        quit_corral(pane, stty)
    finally:
        pane.close()
