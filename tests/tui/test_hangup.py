"""corral leaves when its terminal goes away: the real program in a real tmux session,
the session killed under it (as a dropped SSH connection or a closed window does), also
when it runs as ``su root -c corral`` (a session of its own: no SIGHUP reaches it)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.hangup import terminal_gone

ROOT = Path(__file__).resolve().parents[2]
CORRAL = Path(sys.executable).with_name("corral")


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True,
                         check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        children.setdefault(pp, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def corral_pid(pane_pid: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in [pane_pid, *descendants(pane_pid)]:
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"/corral") for a in cmd[:2]):
                return p
        time.sleep(0.1)
    raise AssertionError("corral did not start in tmux")


@pytest.fixture
def script(tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (run scripts/setup-lab.sh)", pytrace=False)
    (tmp_path / "config.toml").write_text("[qemu]\nenabled = false\n[lxc]\nenabled = false\n")
    for d in ("lxc", "incus"):
        (tmp_path / d).mkdir()
    run = tmp_path / "run.sh"
    run.write_text(f"#!/bin/sh\nexport CORRAL_CONFIG_FILE={tmp_path}/config.toml "
                   f"LXD_CONF={tmp_path}/lxc INCUS_CONF={tmp_path}/incus\n"
                   f"exec {CORRAL}\n")
    run.chmod(0o755)
    return run


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("how", ["direct", "su -c"])
def test_killed_tmux_session_ends_corral_within_seconds(script, how):
    session = f"corral-hup-{os.getpid()}-{how[:2]}"
    command = str(script) if how == "direct" else f"su root -c {script}"
    tmux = ["tmux", "-L", session]  # a private tmux server
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                    command], check=True)
    pid = None
    try:
        pane = int(subprocess.run([*tmux, "display", "-p", "-t", session, "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout)
        pid = corral_pid(pane)
        deadline = time.monotonic() + 30
        screen = b""
        while b"Instances" not in screen:
            assert time.monotonic() < deadline, f"corral did not draw its screen: {screen!r}"
            time.sleep(0.2)
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", session],
                                    capture_output=True, check=False).stdout
        killed = time.monotonic()
        subprocess.run([*tmux, "kill-session", "-t", session], check=True)
        while alive(pid):
            if time.monotonic() - killed > 6:
                spent = cpu_seconds(pid)
                time.sleep(1)
                raise AssertionError(f"corral still runs 6 s after its terminal went away "
                                     f"({cpu_seconds(pid) - spent:.2f} CPU s in 1 s)")
            time.sleep(0.05)
        print(f"{how}: gone {time.monotonic() - killed:.2f} s after the session was killed")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        if pid and Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)


def test_terminal_gone_sees_a_hung_up_pty():
    master, slave = os.openpty()
    try:
        assert not terminal_gone(slave)
        os.close(master)
        assert terminal_gone(slave)
    finally:
        os.close(slave)
