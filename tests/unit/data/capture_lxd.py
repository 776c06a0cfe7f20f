#!/usr/bin/env python3
"""Capture real LXD and Incus responses for tests/unit/test_lxd_convert.py.

Run once (as root, on a machine with the lab's packages) from the repository root:

    .venv/bin/python tests/unit/data/capture_lxd.py

It starts a private lab (tests/lab.py) in a temp dir, makes two busybox containers on
lxd1 and on incus1 (``c1`` running, with limits and two snapshots; ``c2`` stopped), saves
the daemons' whole JSON answers as ``<daemon kind>-<what>.json`` beside this file and stops
the lab. Nothing secret is in them: the daemons are private and gone afterwards.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/

import lab as labmod  # noqa: E402

EXPIRES = "2099-01-01T00:00:00Z"


def rest(daemon, method: str, path: str, body: dict | None = None) -> dict:
    """The daemon's whole answer (the envelope: type, status, metadata, operation)."""
    cmd = ["curl", "-sS", "--unix-socket", str(daemon.socket), "-X", method,
           f"http://unix{path}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out)


def wait(daemon, response: dict) -> dict:
    op = response["metadata"]["id"]
    return rest(daemon, "GET", f"/1.0/operations/{op}/wait?timeout=60")


async def events_during(daemon, action, after: float = 1.5) -> list[dict]:
    """The lifecycle and operation frames of /1.0/events while ``action`` runs (in a
    thread), and for ``after`` seconds more."""
    from websockets.asyncio.client import unix_connect

    frames: list[dict] = []
    async with unix_connect(str(daemon.socket), "ws://unix/1.0/events?type=lifecycle,operation",
                            proxy=None) as ws:
        task = asyncio.create_task(asyncio.to_thread(action))
        deadline = None
        while deadline is None or time.monotonic() < deadline:
            if deadline is None and task.done():
                deadline = time.monotonic() + after
            try:
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 0.2)))
            except asyncio.TimeoutError:
                continue
        await task
    return frames


def capture(daemon, prefix: str) -> None:
    def save(what: str, data) -> None:
        (HERE / f"{prefix}-{what}.json").write_text(json.dumps(data, indent=1) + "\n")

    daemon.cli("init", "busybox", "c1")
    daemon.cli("config", "set", "c1", "limits.memory", "512MiB")
    daemon.cli("config", "set", "c1", "limits.cpu", "1")
    rest(daemon, "PATCH", "/1.0/instances/c1", {"description": "captured by corral"})
    daemon.cli("init", "busybox", "c2")
    daemon.cli("start", "c1")
    # a snapshot, through an operation: the operation as started and as finished
    started = rest(daemon, "POST", "/1.0/instances/c1/snapshots", {"name": "snap0"})
    save("operation-running", started)
    save("operation-done", wait(daemon, started))
    wait(daemon, rest(daemon, "POST", "/1.0/instances/c1/snapshots",
                      {"name": "snap1", "expires_at": EXPIRES}))
    # a stateful snapshot of a container fails (no CRIU): an operation with an error
    failed = rest(daemon, "POST", "/1.0/instances/c1/snapshots",
                  {"name": "live", "stateful": True})
    wait(daemon, failed)  # Incus answers the wait of a failed operation with an error
    save("operation-failed", rest(daemon, "GET", f"/1.0/operations/{failed['metadata']['id']}"))
    time.sleep(1.5)  # the CPU counters move
    save("instances-recursion1", rest(daemon, "GET", "/1.0/instances?recursion=1"))
    save("instances-recursion2", rest(daemon, "GET", "/1.0/instances?recursion=2"))
    save("instances", rest(daemon, "GET", "/1.0/instances"))
    save("state-running", rest(daemon, "GET", "/1.0/instances/c1/state"))
    save("state-stopped", rest(daemon, "GET", "/1.0/instances/c2/state"))
    save("snapshots-recursion1", rest(daemon, "GET", "/1.0/instances/c1/snapshots?recursion=1"))
    save("images-recursion1", rest(daemon, "GET", "/1.0/images?recursion=1"))
    save("operations-recursion1", rest(daemon, "GET", "/1.0/operations?recursion=1"))
    frames = asyncio.run(events_during(
        daemon, lambda: (daemon.cli("stop", "--force", "c1"), daemon.cli("start", "c1"))))
    save("events", frames)
    daemon.cli("delete", "--force", "c1", "c2")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cap-", dir="/tmp") as root:
        Path(root).chmod(0o711)  # unprivileged containers traverse it to their rootfs
        lab = labmod.Lab(Path(root) / "lab")
        with lab:
            capture(lab.lxd1, "lxd")
            capture(lab.incus1, "incus")
    print(f"saved to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
