#!/usr/bin/env python3
"""Benchmark: how fast corral's first screen is, as a user sees it (prints figures; not a test).

    .venv/bin/python tests/bench/bench_startup.py [-n 600] [--vms 20] [--root DIR] [--runs 5]
        [--idle-seconds 30] [--consoles 4] [--cluster-root DIR | --no-cluster]
        [--cluster-per-member 20] [--lxc 4]

Spreads N busybox containers over three remotes (lxd1 on the unix socket, lxd2 and incus1
over HTTPS), adds a 3-member LXD cluster as the remote ``clu`` (CLUSTER_PER_MEMBER
containers on each member; ``--cluster-root`` takes one from `python tests/lab.py up
--cluster lxd --root DIR`, otherwise a private one is formed) and LXC local LXC containers
in a private lxcpath, defines VMS local QEMU VMs, then starts the real ``corral`` command in a
160x45 tmux pane again and again and reads the pane (through one tmux control-mode client:
no process per look) until

* **painted**: the table's title counts every instance (from the cache on a warm start,
  marked stale), and
* **fresh**: every remote is listed in this run (no remote says ``refreshing``: the
  rows are the daemons' answers of this run, not the cache) and the count is complete,
* **connected**: every remote's backend is connected too (no remote says ``connecting``:
  its events are followed and its verbs offered),

each measured from the moment the command was started (interpreter, imports and all).
Cold runs delete the inventory cache first; warm runs keep the one the previous run wrote.
Beside them, the CLIs on the same remotes, in the same run: ``lxc list -c ns`` + ``incus
list -c ns`` (names and status; the cluster included) and the full ``lxc list --format
csv`` + ``incus list --format csv``, and the ratio of each corral figure to the first;
and the floor of any Textual app: a fresh interpreter importing ``textual.app``.
Then, cold and warm, ``/bench-0007`` and Enter typed in one write the moment the rows
appear: how long until the filter is applied (or that it was lost); and, from a cold
start, containers launched with ``lxc`` 1 to 10 s after the start: how long from the CLI's
return until each row is in corral's table. Last, corral is left alone with every row
listed and CONSOLES shells open: its CPU over IDLE_SECONDS and its resident memory.
Targets: warm painted <= 0.3 s, warm fresh <= 0.5 s, cold fresh <= 0.5 s (600 instances);
idle <= 0.5 % of a core, RSS <= 120 MiB with 4 consoles.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import (  # noqa: E402
    TMUX,
    Control,
    add_root_option,
    cpu_percent,
    lab_up,
    quit_corral,
    start_corral,
)

CLUSTER_REMOTE = "clu"

REMOTES = (("lxc", "local", "lxd1"), ("lxc", "lab2", "lxd2"), ("incus", "inc1", "incus1"))


def populate(lab, n: int, running: int) -> None:
    """N containers named bench-NNNN over the three remotes, ``running`` of them started."""
    per = [n // 3 + (1 if i < n % 3 else 0) for i in range(3)]
    t0 = time.monotonic()
    for (_, _, attr), count in zip(REMOTES, per):
        daemon = getattr(lab, attr)
        have = set(daemon.cli("list", "--format", "csv", "-c", "n").stdout.split())
        names = [f"bench-{i:04d}" for i in range(count)]
        for name in names:
            if name not in have:
                daemon.cli("init", "busybox", name)
        states = dict(line.split(",", 1) for line in daemon.cli(
            "list", "--format", "csv", "-c", "ns").stdout.split())
        for name in names[: running // 3]:
            if states.get(name) != "RUNNING":
                daemon.cli("start", name, check=False)
    print(f"populated {n} containers in {time.monotonic() - t0:.1f} s")


def define_vms(qemu_dir: Path, count: int) -> None:
    """``count`` stopped QEMU VMs defined through corral's own backend (tiny disks)."""
    import asyncio

    from backends.models import InstanceType
    from backends.create_models import CreateRequest, CreateSource
    from backends.qemu import qemu_remote
    from backends.qemu.backend import QEMUBackend

    async def make() -> None:
        backend = QEMUBackend(qemu_remote(str(qemu_dir)))
        await backend.connect()
        have = {i.name for i in await backend.list_instances()}
        source = CreateSource("pxe", "PXE", type=InstanceType.VM)
        for i in range(count):
            name = f"vm-{i:02d}"
            if name not in have:
                await backend.create_instance(CreateRequest(
                    name=name, source=source, memory=128 * 1024 * 1024,
                    disk=64 * 1024 * 1024, network="user", options={"accel": "tcg"}))
        await backend.close()

    asyncio.run(make())


def add_cluster(cluster, env: dict[str, str], work: Path, per_member: int) -> int:
    """The cluster as the remote ``clu`` of a copy of the lab's lxc configuration (the lab's
    client certificate trusted by the cluster); ``env`` then points at the copy. Returns
    how many instances the cluster has."""
    conf = work / "lxc-conf"
    shutil.copytree(env["LXD_CONF"], conf, dirs_exist_ok=True)
    cluster.cli("config", "trust", "add", str(conf / "client.crt"), check=False)  # (again: ok)
    shutil.copy(cluster.conf / "servercerts" / f"{CLUSTER_REMOTE}.crt",
                conf / "servercerts" / f"{CLUSTER_REMOTE}.crt")
    text = (conf / "config.yml").read_text()
    entry = (f"  {CLUSTER_REMOTE}:\n    addr: {cluster.leader.url}\n    project: default\n"
             "    protocol: lxd\n    public: false\n")
    if f"\n  {CLUSTER_REMOTE}:\n" not in text:
        (conf / "config.yml").write_text(text.replace("remotes:\n", "remotes:\n" + entry, 1))
    env["LXD_CONF"] = str(conf)
    import lab_cluster

    have = len(cluster.cli("list", "--format", "csv",
                           "-c", "n").stdout.split())
    if have < per_member * len(cluster.members):
        lab_cluster.populate(cluster, per_member, running=3, prefix=f"b{have}")
    return len(cluster.cli("list", "--format", "csv",
                           "-c", "n").stdout.split())


def make_lxc(path: Path, count: int) -> None:
    """``count`` LXC containers (busybox template) in the private lxcpath ``path``, one
    of them running."""
    path.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"lxc-{i:02d}"
        if not (path / name / "config").exists():
            subprocess.run(["lxc-create", "-P", str(path), "-t", "busybox", "-n", name],
                           check=True, capture_output=True)
    if count:
        subprocess.run(["lxc-start", "-P", str(path), "-n", "lxc-00"], check=False,
                       capture_output=True)


def stop_lxc(path: Path) -> None:
    for entry in path.glob("*/config"):
        subprocess.run(["lxc-stop", "-P", str(path), "-n", entry.parent.name, "-k"],
                       check=False, capture_output=True)


def machine_speed() -> float:
    """Seconds for ten million additions in a Python loop (the median of three): a
    reference for comparing these figures across machines (the session machines here
    have differed by 2x)."""
    def once() -> float:
        t0 = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        return time.perf_counter() - t0

    return statistics.median(once() for _ in range(3))


def import_floor(repeats: int = 5) -> float:
    """Seconds a fresh interpreter takes to start and import ``textual.app`` alone (the
    median of ``repeats``): the least any Textual app needs before its first frame."""
    python = str(ROOT / ".venv" / "bin" / "python")

    def once() -> float:
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "import textual.app"], check=True)
        return time.perf_counter() - t0

    return statistics.median(once() for _ in range(repeats))


def cli_times(env: dict[str, str], remotes=REMOTES, repeats: int = 5) -> tuple[float, float]:
    def run(extra: list[str]) -> float:
        t0 = time.perf_counter()
        for tool, remote, _ in remotes:
            subprocess.run([tool, "list", f"{remote}:", *extra], env=env, check=True,
                           capture_output=True)
        return time.perf_counter() - t0

    short = statistics.median(run(["-c", "ns", "--format", "csv"]) for _ in range(repeats))
    full = statistics.median(run(["--format", "csv"]) for _ in range(repeats))
    return short, full


def launch(control: Control, cfg: Path, n: int, timeout: float = 30.0):
    """Start corral in tmux; return (painted, fresh, connected) seconds after the start."""
    total = re.compile(rf"Instances \({n}\)")
    painted = fresh = connected = None
    session, t0 = start_corral(control, cfg, "start")
    try:
        while time.perf_counter() - t0 < timeout:
            screen = "\n".join(control.command(f"capture-pane -p -t {session}"))
            now = time.perf_counter() - t0
            if total.search(screen):
                painted = painted or now
                if "refreshing" not in screen:
                    fresh = fresh or now
                    if "connecting" not in screen:
                        connected = now
                        break
            time.sleep(0.002)
    finally:
        quit_corral(control, session)
    return painted, fresh, connected


def launch_typing(control: Control, cfg: Path, n: int, probe: str, shown: int,
                  timeout: float = 30.0):
    """Start corral in tmux and, the moment its rows appear, type a filter in one write
    (``/probe`` and Enter, as a fast typist or a paste); return (rows, applied) seconds
    after the start: when the rows appeared, and when the table shows only the probe's
    ``shown`` rows (None: the filter was lost)."""
    total = re.compile(rf"Instances \({n}\)")
    one = re.compile(rf"Instances \({shown}/{n}\)")
    rows = applied = None
    session, t0 = start_corral(control, cfg, "type")
    try:
        while time.perf_counter() - t0 < timeout:
            screen = "\n".join(control.command(f"capture-pane -p -t {session}"))
            now = time.perf_counter() - t0
            if rows is None and total.search(screen):
                rows = now
                control.command(f"send-keys -t {session} /{probe} Enter")
            elif rows is not None and one.search(screen) and "last run" not in screen:
                applied = now
                break
            time.sleep(0.002)
    finally:
        quit_corral(control, session, "Escape")
    return rows, applied


def early_events(control: Control, lab, cfg: Path, n: int, at: tuple[float, ...]):
    """Start corral cold and launch a container with the ``lxc`` CLI ``at`` seconds after
    the start; for each, the seconds from the CLI's return to its row in corral's table
    (the row sorts first: ``aaa-ev-N``). None: not shown within 10 s."""
    for i in range(len(at)):
        lab.lxd1.cli("delete", "--force", f"aaa-ev-{i}", check=False)
    latencies: list[float | None] = []
    session, t0 = start_corral(control, cfg, "events")
    try:
        for i, when in enumerate(at):
            while time.perf_counter() - t0 < when:
                time.sleep(0.005)
            lab.lxd1.cli("launch", "busybox", f"aaa-ev-{i}")
            returned = time.perf_counter()
            seen = None
            while time.perf_counter() - returned < 10:
                screen = "\n".join(control.command(f"capture-pane -p -t {session}"))
                if f"aaa-ev-{i} " in screen:
                    seen = time.perf_counter() - returned
                    break
                time.sleep(0.002)
            latencies.append(seen)
    finally:
        quit_corral(control, session)
        for i in range(len(at)):
            lab.lxd1.cli("delete", "--force", f"aaa-ev-{i}", check=False)
    return latencies


def idle_and_memory(env: dict[str, str], cfg: Path, n: int, consoles: int,
                    seconds: float) -> tuple[float, float]:
    """corral with every row and ``consoles`` shells open, left alone: (% of a core, RSS MiB)."""
    session = f"corral-idle-{os.getpid()}"
    corral = str(ROOT / ".venv" / "bin" / "corral")
    subprocess.run([*TMUX, "new-session", "-d", "-s", session, "-x", "160", "-y", "45",
                    corral, "--config", str(cfg)], env=env, check=True)

    def keys(*k: str) -> None:
        subprocess.run([*TMUX, "send-keys", "-t", session, *k], check=True)
        time.sleep(0.4)

    def screen() -> str:
        return subprocess.run([*TMUX, "capture-pane", "-p", "-t", session],
                              capture_output=True, text=True).stdout

    try:
        deadline = time.monotonic() + 30
        while f"Instances ({n})" not in (text := screen()) or "refreshing" in text \
                or "connecting" in text:
            if time.monotonic() > deadline:
                raise RuntimeError("corral did not list every instance in 30 s")
            time.sleep(0.1)

        def wait_for(predicate, what: str) -> str:
            end = time.monotonic() + 20
            while not predicate(text := screen()):
                if time.monotonic() > end:
                    raise RuntimeError(f"{what}:\n{text}")
                time.sleep(0.1)
            return text

        # Keys typed faster than the filter takes the focus would go to the table.
        time.sleep(2)  # the first samples and listings are in
        keys("/")
        subprocess.run([*TMUX, "send-keys", "-t", session, "-l",
                        "status=running type=container"], check=True)
        wait_for(lambda t: "status=running type=container" in t, "the filter took no text")
        keys("Enter")
        wait_for(lambda t: re.search(rf"Instances \(\d+/{n}\)", t), "the filter was not applied")
        for opened in range(1, consoles + 1):
            keys("e")
            wait_for(lambda t: t.count("· shell") >= opened + 1,  # its tab and its title
                     f"shell {opened} did not open")
            keys("C-]")
            keys("j")
        pid = int(subprocess.run([*TMUX, "display", "-p", "-t", session, "#{pane_pid}"],
                                 capture_output=True, text=True, check=True).stdout)
        time.sleep(5)
        busy = cpu_percent(pid, seconds)
        rss = next(int(line.split()[1]) for line in
                   Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("VmRSS:")) / 1024
        return busy, rss
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", session], check=False)


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    atexit.register(subprocess.run, [*TMUX, "kill-server"], capture_output=True, check=False)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=600, help="containers (default 600)")
    parser.add_argument("--running", type=int, default=30)
    parser.add_argument("--vms", type=int, default=20, help="local QEMU VMs (default 20)")
    parser.add_argument("--runs", type=int, default=5)
    add_root_option(parser)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--consoles", type=int, default=4)
    parser.add_argument("--cluster-root", type=Path, default=None,
                        help="a cluster from `lab.py up --cluster lxd --root DIR`")
    parser.add_argument("--no-cluster", action="store_true", help="leave the cluster out")
    parser.add_argument("--cluster-per-member", type=int, default=20)
    parser.add_argument("--lxc", type=int, default=4, help="local LXC containers (default 4)")
    args = parser.parse_args()

    clustered = contextlib.nullcontext(None) if args.no_cluster \
        else lab_up(args.cluster_root, cluster="lxd")
    with lab_up(args.root) as lab, clustered as cluster, tempfile.TemporaryDirectory(
            prefix="corral-bench-start-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        env = lab.env()
        env["XDG_CACHE_HOME"] = str(work / "cache")
        # Installed corral has its bytecode (pip, pipx and uv compile it); a shell with
        # PYTHONDONTWRITEBYTECODE set would make every start compile ~150 modules anew
        # (~40 ms of painted, ~0.2 s of a cold start's fresh here): not what users see.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        populate(lab, args.n, args.running)
        define_vms(work / "qemu", args.vms)
        remotes, on_cluster = REMOTES, 0
        if cluster is not None:
            on_cluster = add_cluster(cluster, env, work, args.cluster_per_member)
            remotes = (*REMOTES, ("lxc", CLUSTER_REMOTE, None))
        lxcpath = work / "lxc"
        make_lxc(lxcpath, args.lxc)
        atexit.register(stop_lxc, lxcpath)
        cfg = work / "config.toml"
        cfg.write_text(f'[remotes]\nhide = ["incus-local"]\n[qemu]\npath = "{work / "qemu"}"\n'
                       f'[lxc]\nenabled = {"true" if args.lxc else "false"}\n'
                       f'paths = ["{lxcpath}"]\n')
        speed = machine_speed()
        short, full = cli_times(env, remotes)
        floor = import_floor()
        total = args.n + args.vms + on_cluster + args.lxc
        control = Control(env)
        atexit.register(control.close)
        launch(control, cfg, total)  # warm the page cache and Python's bytecode
        cold, warm = [], []
        for _ in range(args.runs):
            shutil.rmtree(work / "cache", ignore_errors=True)
            cold.append(launch(control, cfg, total))
            warm.append(launch(control, cfg, total))  # with the cache the cold run wrote

        def fig(runs, index: int) -> str:
            values = [r[index] for r in runs if r[index] is not None]
            if not values:
                return "    —   "
            mid = statistics.median(values)
            return (f"{mid * 1000:6.0f} ms  = {mid / short:4.2f} x list -c ns  "
                    f"(all: {', '.join(f'{v * 1000:.0f}' for v in values)})")

        print()
        print(f"{args.n} containers on 3 remotes (lxd unix, lxd https, incus https)"
              + (f" + {on_cluster} on a 3-member LXD cluster" if cluster is not None else "")
              + f" + {args.lxc} LXC containers + {args.vms} local QEMU VMs; "
              f"medians of {args.runs}; every figure from a fresh corral process")
        print(f"this machine: 10M Python additions in {speed:.2f} s (start-up figures scale with it)")
        print(f"lxc/incus list -c ns, all remotes:    {short * 1000:6.0f} ms")
        print(f"lxc/incus list --format csv, all:     {full * 1000:6.0f} ms")
        print(f"python -c 'import textual.app':       {floor * 1000:6.0f} ms  = "
              f"{floor / short:4.2f} x list -c ns  (interpreter and Textual alone)")
        print(f"cold start, every row painted:        {fig(cold, 0)}")
        print(f"cold start, every row fresh:          {fig(cold, 1)}  (target <= 2 x list -c ns)")
        print(f"cold start, every remote connected:   {fig(cold, 2)}")
        print(f"warm start, every row painted:        {fig(warm, 0)}  (target <= 300 ms)")
        print(f"warm start, every row fresh:          {fig(warm, 1)}  (target <= 1 x list -c ns)")
        print(f"warm start, every remote connected:   {fig(warm, 2)}")
        typed_cold, typed_warm = [], []
        for _ in range(args.runs):
            shutil.rmtree(work / "cache", ignore_errors=True)
            typed_cold.append(launch_typing(control, cfg, total, "bench-0007", 3))
            typed_warm.append(launch_typing(control, cfg, total, "bench-0007", 3))

        def typed(runs) -> str:
            lost = sum(1 for r in runs if r[1] is None)
            after = [r[1] - r[0] for r in runs if r[1] is not None and r[0] is not None]
            if not after:
                return f"lost in every run ({lost} of {len(runs)})"
            return (f"{statistics.median(after) * 1000:6.0f} ms after the rows  "
                    f"(all: {', '.join(f'{v * 1000:.0f}' for v in after)}; "
                    f"lost: {lost} of {len(runs)})")

        print(f"cold, '/bench-0007⏎' typed at first rows: applied {typed(typed_cold)}")
        print(f"warm, '/bench-0007⏎' typed at first rows: applied {typed(typed_warm)}")
        shutil.rmtree(work / "cache", ignore_errors=True)
        marks = (1.0, 2.0, 4.0, 6.0, 8.0, 10.0)
        events = early_events(control, lab, cfg, total, marks)
        print("event latency in the first 10 s (lxc launch returned -> row shown): " + ", ".join(
            f"{m:.0f} s: {'lost' if v is None else f'{v * 1000:.0f} ms'}"
            for m, v in zip(marks, events)) + "  (target <= 250 ms)")
        busy, rss = idle_and_memory(env, cfg, total, args.consoles, args.idle_seconds)
        print(f"idle with {args.consoles} shells open, over {args.idle_seconds:.0f} s: "
              f"{busy:.2f} % of a core (target <= 0.5 %); RSS {rss:.0f} MiB "
              f"(target <= 120 MiB)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
