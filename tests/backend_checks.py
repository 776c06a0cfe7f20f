"""Helpers of the tests against real things: what the real CLIs say about the lab's
daemons and a private lxcpath (the judges of what corral did), a busybox container to
work on, and a backend's event stream as a queue."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from pathlib import Path

# The lab's LXD/Incus remotes in the lab's CLI config: lxd1 over its unix socket, lxd2
# over HTTPS through `lxc remote add`, Incus over HTTPS through `incus remote add`.
REMOTES = ["local", "lab2", "inc1"]


def stranger_remotes(lab, lab_env, tmp_path) -> dict:
    """The lab's remotes, by name, as seen by a client whose certificate no daemon trusts
    (a copy of the lab's lxc config with a new client key)."""
    import shutil

    from backends.remotes import discover

    conf = tmp_path / "lxc"
    shutil.copytree(lab.lxd_conf, conf)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp384r1",
         "-nodes", "-subj", "/CN=stranger", "-days", "2", "-keyout", str(conf / "client.key"),
         "-out", str(conf / "client.crt")], check=True, capture_output=True)
    return {r.name: r for r in discover(dict(lab_env, LXD_CONF=str(conf))).remotes}


def daemon_for(lab, name):
    return {"local": lab.lxd1, "lab2": lab.lxd2, "inc1": lab.incus1}[name]


def names(daemon) -> set[str]:
    """The instances `lxc list` / `incus list` shows on ``daemon``."""
    out = daemon.cli("list", "--format", "csv", "-c", "n").stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def cli_status(daemon, name):
    """The status the CLI lists for ``name`` (RUNNING, STOPPED, ...), or None."""
    out = daemon.cli("list", name, "--format", "csv", "-c", "ns").stdout.strip()
    for line in out.splitlines():
        n, status = line.split(",")
        if n == name:
            return status
    return None


def lxc(path, tool, *args, check=True):
    """Run an lxc-* ``tool`` on the lxcpath ``path``."""
    return subprocess.run([tool, "-P", str(path), *args], capture_output=True, text=True,
                          check=check)


def busybox_container(path, name) -> None:
    """Create the busybox container ``name`` in the lxcpath ``path`` with no NIC (its
    default one needs lxcbr0, which this host does not have)."""
    lxc(path, "lxc-create", "-t", "busybox", "-n", name)
    config = Path(path) / name / "config"
    config.write_text("\n".join(line for line in config.read_text().splitlines()
                                if not line.startswith("lxc.net.")) + "\nlxc.net.0.type = empty\n")


def state(path, name):
    """What `lxc-info -s` says of the container ``name`` (RUNNING, STOPPED), or None."""
    out = lxc(path, "lxc-info", "-n", name, "-s", check=False).stdout
    return out.split(":", 1)[1].strip() if ":" in out else None


@contextlib.asynccontextmanager
async def watching(backend):
    """A queue that gets every event of ``backend.watch()`` while the block runs."""
    events: asyncio.Queue = asyncio.Queue()

    async def pump():
        async for ev in backend.watch():
            await events.put(ev)

    task = asyncio.create_task(pump())
    try:
        yield events
    finally:
        task.cancel()


def cfg(daemon, name, key):
    """What `lxc config get` says of ``key`` on the instance ``name``."""
    return daemon.cli("config", "get", name, key).stdout.strip()


async def busybox(backend):
    """The create source of the lab's busybox image on an LXD/Incus backend."""
    sources = await backend.create_sources()
    return next(s for s in sources if s.kind == "image" and "busybox" in s.label)


def host_memory_limit(pid: int) -> int:
    """The memory limit the kernel enforces for ``pid``'s cgroup (v1 or v2), read on the
    host (the busybox guest does not mount /sys/fs/cgroup)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hier, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return int(Path(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes").read_text())
        if hier == "0" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return int(Path(f"/sys/fs/cgroup{path}/memory.max").read_text())
    raise AssertionError(f"no memory cgroup for pid {pid}")


def init_pid(daemon, name) -> int:
    """The host PID of the instance's init process, as the daemon says."""
    data = json.loads(daemon.cli("query", f"/1.0/instances/{name}/state").stdout)
    return int(data["pid"])


async def longest_stall(*steps):
    """Run the awaitables ``steps`` in turn while a ticker wakes every 20 ms; (their
    results, the longest the event loop stood still meanwhile, in seconds). A read done
    on the loop instead of in a thread shows as a stall as long as the read."""
    import time

    gaps: list[float] = []

    async def ticking() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(ticking())
    try:
        results = [await step for step in steps]
        await asyncio.sleep(0.05)  # the ticker sees the last stretch too
    finally:
        ticker.cancel()
    assert gaps, "the ticker never ran"
    return results, max(gaps)
