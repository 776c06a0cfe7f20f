#!/usr/bin/env python3
"""Benchmark: corral on a libvirt remote, beside ``virsh`` on the same daemon and, where it
can be had, a Textual libvirt TUI of another project (a script that prints figures, not a
test).

    .venv/bin/python tests/bench/bench_libvirt.py [-n 200] [--running 20] [--repeats 5]
        [--idle-seconds 30] [--events 5] [--memory 128] [--setup-peer] [--no-peer]

Starts a private libvirtd (``tests/lab_libvirt.py``, as root), defines N domains of the
test guest and starts RUNNING of them (TCG, MEMORY MiB each), waits until their QEMUs have
booted (their CPU use falls), then prints, each figure from a fresh process:

* **listing N defined domains** (RUNNING of them running): medians of ``virsh -c URI list
  --all``; the backend alone, a Python process that imports corral's libvirt backend,
  connects and lists (``list_instances``: one ``getAllDomainStats`` and each domain's XML),
  timed from its start to the list; the real ``corral`` command in a tmux pane until its
  table shows all N rows fresh (``benchlib.time_first_table``; a config with the lab as
  its only remote). Target: 200 domains within 1 s.

Then the stopped domains are undefined, and with the RUNNING domains left (the issue's
"20 TCG domains"):

* **launch to every row**: the real ``corral`` (fresh process, cold: an empty inventory
  cache) until every domain's row shows ``running``, beside ``virsh list --all`` (target
  1 s, as for 200 defined domains);
* **idle**: that corral left alone 5 s after every row showed, its CPU over IDLE_SECONDS
  (``/proc/<pid>/stat`` utime + stime) and its RSS (targets as ``bench_startup.py``'s:
  0.5 % of a core, 120 MiB);
* **event latency**: ``virsh suspend``, ``resume``, ``destroy`` and ``start`` on EVENTS
  domains, one after the other, in the same corral: the ms from virsh's return until the
  row shows the new state (read through one tmux control-mode client, as
  ``bench_startup.py`` does); medians per verb, beside ``virsh event --loop``'s arrival of
  the same event (negative: before the command itself returned). Target 250 ms, as for
  LXD's events.

Last, the peer: ``virtui-manager`` (a Textual libvirt manager on the package index, which
has none of the names virtui, libvirt-tui, virt-tui, textual-virt and lazyvirt; its
vmanager is an unrelated tool). ``--setup-peer`` installs it in a venv of its own under /tmp (never
corral's), with Debian's python3-gi in place of PyGObject, which does not build here
without the cairo headers. Measured the same way: start (fresh process, in a 160x45 pane)
until its first page of VM cards (12 at that size) each shows a state and its title
counts the domains; then its idle CPU and RSS. It has no cache of its own to empty; a
first start that makes its TLS keys is not counted. On the lab its cards say "Stopped" for
running domains: it reads a domain's CPU time with ``getCPUStats``, which libvirt
refuses for the lab's QEMU, run without cgroups ("cgroup CPUACCT controller is not
mounted"), and it takes that refusal for a stopped domain; so its event latency is not
measured here.

On the machine this was written on (2 cores, shared with other engineers' tests): 200
domains' first full table about 0.9 s (0.25 s for the backend alone, 20 ms for virsh).
Ratios are for information: virsh is a C program printing names; corral a Python program
that starts a terminal UI and reads each domain's state, memory, vCPUs and definition.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

import lab_libvirt  # noqa: E402
import qemu_guest  # noqa: E402
from benchlib import (  # noqa: E402
    TMUX,
    Control,
    cpu_percent,
    cpu_seconds,
    quit_corral,
    start_corral,
    time_first_table,
)

LIST = """
import asyncio, sys, time
t0 = time.perf_counter()
from backends import get_backend
from backends.models import Remote
async def main():
    b = get_backend(Remote(name="lab", kind="libvirt", address=sys.argv[1]), timeout=30)
    await b.connect()
    n = len(await b.list_instances())
    print(n, time.perf_counter() - t0)
    await b.close()
asyncio.run(main())
"""

ROW = re.compile(r"(bench-\d{4}-[0-9a-f]{4})\s+lab\s+VM\s+(\w+)")
"""A domain's row in corral's table: its name and its status."""

VERBS = (("suspend", "frozen", "Suspended"), ("resume", "running", "Resumed"),
         ("destroy", "stopped", "Stopped"), ("start", "running", "Started"))
"""virsh's verb, the status corral's row then shows, the word of virsh's event."""

PEER = "virtui-manager"
PEER_VENV = Path("/tmp/corral-bench-peer")
PEER_PAGE = 12
"""The VM cards on the peer's first page in a 160x45 pane (its default view)."""
PEER_STATE = re.compile(r"\b(Stopped|Running|Paused|Guest Suspended|Blocked|Unknown)\b")


def median_of(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.0f} ms   (all: " \
           f"{', '.join(f'{t * 1000:.0f}' for t in times)})"


def virsh_times(uri: str, n: int, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run(["virsh", "-c", uri, "list", "--all", "--name"],
                              capture_output=True, text=True, check=True)
        out.append(time.perf_counter() - t0)
        assert len([line for line in done.stdout.splitlines() if line.strip()]) == n
    return out


def backend_times(uri: str, n: int, repeats: int) -> list[float]:
    """Seconds from starting a Python process to its ``list_instances`` of ``n``."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", LIST, uri], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        out.append(time.perf_counter() - t0)
        count = int(done.stdout.split()[0])
        assert count == n, done.stdout
    return out


def settle(lab, count: int, limit: float = 300.0) -> tuple[float, float]:
    """Wait until the lab's QEMUs have booted: their CPU use together, over 3 s, below 5 %
    of a core per guest (a booting TCG guest takes a whole core). Returns (seconds waited,
    that last use in % of a core); gives up after ``limit`` seconds."""
    t0 = time.monotonic()
    while True:
        qemus = [pid for pid in lab.pids() if b"qemu-system" in _cmdline(pid)]

        def used() -> float:
            total = 0.0
            for pid in qemus:
                with contextlib.suppress(OSError):
                    total += cpu_seconds(pid)
            return total

        c0, w0 = used(), time.monotonic()
        time.sleep(3)
        busy = (used() - c0) / (time.monotonic() - w0) * 100
        if busy < 5 * count or time.monotonic() - t0 > limit:
            return time.monotonic() - t0, busy


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def undefine(uri: str, names: list[str]) -> None:
    import libvirt

    conn = libvirt.open(uri)
    try:
        for name in names:
            conn.lookupByName(name).undefine()
    finally:
        conn.close()


def rows(screen: str) -> dict[str, str]:
    """Each domain's status as corral's pane shows it."""
    return {m[1]: m[2] for m in map(ROW.search, screen.splitlines()) if m}


def look(control: Control, session: str) -> str:
    return "\n".join(control.command(f"capture-pane -p -t {session}"))


def wait_screen(control: Control, session: str, done, timeout: float) -> float | None:
    """Seconds until ``done(screen)`` holds (None: not within ``timeout``)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if done(look(control, session)):
            return time.perf_counter() - t0
        time.sleep(0.002)
    return None


def every_row(control: Control, cfg: Path, cache: Path, names: list[str]):
    """Start corral cold: (session, seconds from its start until every row of ``names``
    shows ``running`` and no remote is refreshing or connecting)."""
    shutil.rmtree(cache, ignore_errors=True)
    session, t0 = start_corral(control, cfg, "rows")

    def done(screen: str) -> bool:
        shown = rows(screen)
        return all(shown.get(n) == "running" for n in names) and "refreshing" not in screen \
            and "connecting" not in screen and "last run" not in screen

    if wait_screen(control, session, done, 120) is None:
        screen = look(control, session)
        quit_corral(control, session)
        raise RuntimeError(f"corral did not show every row running:\n{screen}")
    return session, time.perf_counter() - t0


def pane_pid(session: str, what: str) -> int:
    pid = int(subprocess.run([*TMUX, "display", "-p", "-t", session, "#{pane_pid}"],
                             capture_output=True, text=True, check=True).stdout)
    assert what.encode() in Path(f"/proc/{pid}/cmdline").read_bytes(), f"pane {pid}: not {what}"
    return pid


def idle(pid: int, seconds: float) -> tuple[float, float]:
    """(% of a core over ``seconds`` after 5 s of quiet, RSS MiB) of the process ``pid``."""
    time.sleep(5)
    busy = cpu_percent(pid, seconds)
    rss = next(int(line.split()[1]) for line in
               Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:")) / 1024
    return busy, rss


class EventWatch:
    """``virsh event --loop --all`` and when each of its lines arrived."""

    def __init__(self, uri: str) -> None:
        self.proc = subprocess.Popen(["virsh", "-c", uri, "event", "--loop", "--all"],
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.perf_counter(), line))

    def arrival(self, since: float, domain: str, word: str, timeout: float = 5.0):
        """When the event ``word`` of ``domain`` arrived after ``since`` (None: not yet)."""
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            for at, line in list(self.lines):
                if at >= since and f"'{domain}': {word}" in line:
                    return at
            time.sleep(0.005)
        return None

    def close(self) -> None:
        self.proc.kill()


def events(control: Control, session: str, uri: str, names: list[str]):
    """Each verb of VERBS on each of ``names`` in turn: per verb, the seconds from virsh's
    return to the row's new status (None: not within 10 s) and to virsh event's line."""
    watch = EventWatch(uri)
    shown: dict[str, list] = {verb: [] for verb, _, _ in VERBS}
    heard: dict[str, list] = {verb: [] for verb, _, _ in VERBS}
    try:
        time.sleep(1)  # virsh event has registered
        for name in names:
            for verb, status, word in VERBS:
                t0 = time.perf_counter()
                subprocess.run(["virsh", "-c", uri, verb, name], check=True,
                               capture_output=True)
                back = time.perf_counter()
                shown[verb].append(wait_screen(
                    control, session, lambda s: rows(s).get(name) == status, 10))
                at = watch.arrival(t0, name, word)
                heard[verb].append(None if at is None else at - back)
    finally:
        watch.close()
    return shown, heard


def setup_peer(venv: Path) -> None:
    """The peer in a venv of its own, from the package index: without PyGObject (it does
    not build without the cairo headers; only the peer's graphical viewer needs more than
    ``gi``), whose ``gi`` is Debian's python3-gi (built for the same Python 3.11)."""
    pip = str(venv / "bin" / "pip")
    for argv in ([sys.executable, "-m", "venv", str(venv)], [pip, "install", "--no-deps", PEER],
                 [pip, "install", "libvirt-python", "textual>=8", "PyYAML", "markdown-it-py",
                  "packaging", "requests", "netifaces"]):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{' '.join(argv)}:\n{done.stdout}{done.stderr}")
    gi = Path("/usr/lib/python3/dist-packages/gi")
    if gi.is_dir():
        (venv / "gi-only").mkdir(exist_ok=True)
        (venv / "gi-only" / "gi").symlink_to(gi)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "debian-gi.pth").write_text(f"{venv / 'gi-only'}\n")


def peer_version(venv: Path) -> str | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", "import importlib.metadata as m, vmanager.vmanager;"
                           f" print(m.version('{PEER}'))"], capture_output=True, text=True,
                          cwd="/", check=False)
    return done.stdout.split()[-1] if done.returncode == 0 and done.stdout.split() else None


def peer_start(control: Control, venv: Path, home: Path, n: int):
    """Start the peer: (session, seconds until its title counts ``n`` and its first page's
    cards each show a state)."""
    session = f"peer-{os.getpid()}-{time.monotonic_ns()}"
    t0 = time.perf_counter()
    control.command(f"new-session -d -s {session} -x 160 -y 45 -e HOME={home} "
                    f"'{venv / 'bin' / PEER}'")
    page = min(n, PEER_PAGE)

    def done(screen: str) -> bool:  # (its notifications may hide a card's name, not its state)
        return f"- lab ({n})" in screen and len(PEER_STATE.findall(screen)) >= page

    if wait_screen(control, session, done, 120) is None:
        screen = look(control, session)
        quit_corral(control, session)
        raise RuntimeError(f"{PEER} showed no full first page:\n{screen}")
    return session, time.perf_counter() - t0


def peer(control: Control, venv: Path, work: Path, uri: str, n: int, repeats: int,
         seconds: float):
    """The peer's start to its first full page (median of ``repeats``), idle % and RSS."""
    home = work / "peer-home"
    (home / ".config" / PEER).mkdir(parents=True, exist_ok=True)
    (home / ".config" / PEER / "config.yaml").write_text(
        f'servers:\n  - name: lab\n    uri: "{uri}"\n    autoconnect: true\n')
    quit_corral(control, peer_start(control, venv, home, n)[0])  # makes its TLS keys
    times = []
    for _ in range(repeats):
        session, took = peer_start(control, venv, home, n)
        times.append(took)
        quit_corral(control, session)
    session, _ = peer_start(control, venv, home, n)
    try:
        busy, rss = idle(pane_pid(session, PEER), seconds)
    finally:
        quit_corral(control, session)
    return times, busy, rss


def ms(values: list) -> str:
    got = [v for v in values if v is not None]
    lost = len(values) - len(got)
    if not got:
        return "not shown"
    return (f"{statistics.median(got) * 1000:.0f} ms (all: "
            f"{', '.join(f'{v * 1000:.0f}' for v in got)}"
            + (f"; {lost} not within 10 s" if lost else "") + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200, help="defined domains (default 200)")
    parser.add_argument("--running", type=int, default=20,
                        help="of them started (default 20)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--events", type=int, default=5,
                        help="domains each verb is tried on (default 5)")
    parser.add_argument("--memory", type=int, default=128, help="MiB per domain")
    parser.add_argument("--setup-peer", action="store_true",
                        help=f"install {PEER} in {PEER_VENV} first (from the package index)")
    parser.add_argument("--no-peer", action="store_true", help=f"leave {PEER} out")
    args = parser.parse_args()
    running, n = max(args.running, 1), max(args.n, args.running, 1)
    reason = lab_libvirt.unavailable_reason()
    if reason:
        print(f"the private libvirt cannot run here: {reason}")
        return 1
    if args.setup_peer and peer_version(PEER_VENV) is None:
        shutil.rmtree(PEER_VENV, ignore_errors=True)
        setup_peer(PEER_VENV)
    lab_libvirt.sweep_stale()
    lab = lab_libvirt.LibvirtLab()
    atexit.register(subprocess.run, [*TMUX, "kill-server"], capture_output=True, check=False)
    try:
        lab.start()
        uri = lab.unix_uri
        kernel, initrd = qemu_guest.guest()
        t0 = time.perf_counter()
        names = [f"bench-{i:04d}-{uuid.uuid4().hex[:4]}" for i in range(n)]
        for name in names:
            lab_libvirt.define(lab, lab_libvirt.guest_xml(name, kernel, initrd, args.memory))
        for name in names[:running]:
            subprocess.run(["virsh", "-c", uri, "start", name], check=True,
                           capture_output=True)
        print(f"{n} domains defined ({running} running, TCG, {args.memory} MiB each) in "
              f"{time.perf_counter() - t0:.1f} s on {uri}")
        waited, busy = settle(lab, running)
        print(f"their QEMUs booted: {waited:.0f} s later at {busy:.0f} % of a core together")
        print("figures under load: other engineers' tests share this machine's 2 cores "
              f"(load average {os.getloadavg()[0]:.1f})")

        virsh_times(uri, n, 1)  # warm: the page cache, Python's bytecode
        backend_times(uri, n, 1)
        virsh = virsh_times(uri, n, args.repeats)
        backend = backend_times(uri, n, args.repeats)
        with tempfile.TemporaryDirectory(prefix="corral-bench-libvirt-") as tmp:
            work = Path(tmp)
            cfg = work / "config.toml"
            cfg.write_text(
                '[remotes]\nhide = ["local", "incus-local", "libvirt", "libvirt-session"]\n'
                f'[qemu]\npath = "{work / "qemu"}"\n[lxc]\nenabled = false\n'
                f'[[remote]]\nname = "lab"\nkind = "libvirt"\nuri = "{uri}"\n')
            env = {**os.environ, "HOME": str(work), "XDG_CONFIG_HOME": str(work / "config"),
                   "XDG_RUNTIME_DIR": str(work / "run"), "LXD_SOCKET": str(work / "none"),
                   "INCUS_SOCKET": str(work / "none"), "TMPDIR": str(work)}
            first = time_first_table(cfg, env, n, repeats=args.repeats, timeout=120)
            print(f"virsh list --all (fresh process):                       {median_of(virsh)}")
            print(f"corral backend, connect + list_instances (fresh python): {median_of(backend)}")
            print(f"corral first full table (fresh process, cold, tmux):      {median_of(first)}")
            print(f"corral first full table: {statistics.median(first) * 1000:.0f} ms  "
                  f"(target <= 1000 ms for 200 domains)")
            ratio = statistics.median(first) / statistics.median(virsh)
            print(f"ratio corral first table / virsh list --all: {ratio:.1f}  (for information)")
            ratio = statistics.median(backend) / statistics.median(virsh)
            print(f"ratio corral backend listing / virsh list --all: {ratio:.1f}  "
                  "(for information)")
            print()
            live = names[:running]
            undefine(uri, names[running:])
            running_part(args, uri, live, cfg, env, work)
    finally:
        lab.stop()
    return 0


def running_part(args, uri: str, live: list[str], cfg: Path, env: dict[str, str],
                 work: Path) -> None:
    """The figures with only the running domains defined (see the module docstring)."""
    running = len(live)
    print(f"{running} running domains (the stopped ones undefined):")
    virsh_times(uri, running, 1)
    virsh = virsh_times(uri, running, args.repeats)
    # the cache time_first_table used: the tmux server it started keeps its environment
    cache = work / f"corral-bench-cache-{os.getpid()}"
    control = Control({**env, "XDG_CACHE_HOME": str(cache)})
    try:
        first = []
        for _ in range(args.repeats):
            session, took = every_row(control, cfg, cache, live)
            first.append(took)
            quit_corral(control, session)
        session, _ = every_row(control, cfg, cache, live)
        try:
            busy, rss = idle(pane_pid(session, "corral"), args.idle_seconds)
            shown, heard = events(control, session, uri, live[:args.events])
        finally:
            quit_corral(control, session)
        print(f"virsh list --all (fresh process):                     {median_of(virsh)}")
        print(f"corral launch to every row running (cold, tmux):       {median_of(first)}")
        ratio = statistics.median(first) / statistics.median(virsh)
        print(f"corral launch to every row of {running} running: "
              f"{statistics.median(first) * 1000:.0f} ms (target <= 1000 ms); "
              f"ratio to virsh list --all {ratio:.1f} (for information)")
        print(f"corral idle with {running} running domains, over {args.idle_seconds:.0f} s: "
              f"{busy:.2f} % of a core (target <= 0.5 %); RSS {rss:.0f} MiB "
              f"(target <= 120 MiB)")
        for verb, status, _ in VERBS:
            print(f"event latency, virsh {verb} returned -> row {status}: {ms(shown[verb])} "
                  f"(target <= 250 ms); virsh event --loop line: {ms(heard[verb])}")
        if args.no_peer:
            return
        version = peer_version(PEER_VENV)
        if version is None:
            print(f"peer: {PEER} (the Textual libvirt TUI found on the package index) is not "
                  f"installed in {PEER_VENV}: --setup-peer installs it; no ratio to it")
            return
        times, pbusy, prss = peer(control, PEER_VENV, work, uri, running, args.repeats,
                                  args.idle_seconds)
        page = min(running, PEER_PAGE)
        print(f"peer {PEER} {version}, start to first page ({page} cards, each with a state; "
              f"not correct here, see the docstring): {median_of(times)}")
        print(f"ratio corral every row / peer {PEER} first page: "
              f"{statistics.median(first) / statistics.median(times):.2f} "
              f"({statistics.median(first) * 1000:.0f} ms / "
              f"{statistics.median(times) * 1000:.0f} ms; for information)")
        print(f"peer {PEER} idle over {args.idle_seconds:.0f} s: {pbusy:.2f} % of a core, "
              f"RSS {prss:.0f} MiB; ratio corral / peer: idle {busy / max(pbusy, 0.01):.2f}, "
              f"RSS {rss / prss:.2f} (for information)")
    finally:
        control.close()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
