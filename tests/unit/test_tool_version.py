"""backends/tool_version.py: a local tool's version is asked once per binary (again after
an upgrade), so the first listing's thread can ask it and the backend's connection, on the
event loop, starts no process for it."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from backends import tool_version


@pytest.fixture
def tool(tmp_path, monkeypatch):
    """A fake tool that prints its version and counts its runs in a file."""
    runs = tmp_path / "runs"
    path = tmp_path / "tool"
    path.write_text(f"#!/bin/sh\necho run >> {runs}\necho 'tool version 1.2'\n")
    path.chmod(0o755)
    monkeypatch.setattr(tool_version, "_KNOWN", {})
    return str(path), runs


def count(runs) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_asked_in_a_thread_then_known_on_the_loop(tool):
    path, runs = tool
    assert tool_version.ask(path, "--version") == "tool version 1.2\n"

    async def connect():
        return await tool_version.ask_async(path, "--version")

    assert asyncio.run(connect()) == "tool version 1.2\n"
    assert count(runs) == 1  # the connection started no process


def test_asked_again_after_an_upgrade(tool):
    path, runs = tool
    tool_version.ask(path, "--version")
    with open(path, "a") as f:
        f.write("echo 'patched'\n")  # a new binary: another size and mtime
    assert tool_version.ask(path, "--version") == "tool version 1.2\npatched\n"
    assert count(runs) == 2


def test_a_failing_tool_is_not_remembered(tmp_path, monkeypatch):
    monkeypatch.setattr(tool_version, "_KNOWN", {})
    path = tmp_path / "broken"
    path.write_text("#!/bin/sh\nexit 3\n")
    path.chmod(0o755)
    with pytest.raises(subprocess.CalledProcessError):
        tool_version.ask(str(path), "--version")
    assert asyncio.run(tool_version.ask_async(str(path), "--version")) == ""
    assert tool_version._KNOWN == {}
    with pytest.raises(OSError):
        tool_version.ask(os.fspath(tmp_path / "missing"), "--version")


def test_a_tool_that_hangs_is_killed_after_the_time_out(tmp_path, monkeypatch):
    monkeypatch.setattr(tool_version, "_KNOWN", {})
    pid_file = tmp_path / "pid"
    path = tmp_path / "hangs"
    path.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 30\n")
    path.chmod(0o755)
    with pytest.raises(TimeoutError):
        asyncio.run(tool_version.ask_async(str(path), "--version", timeout=0.5))
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (killed and reaped), not left behind
