"""What the lab benchmarks share: the lab they run against (their own, or one left up by
``tests/lab.py up --root DIR``), CPU time of a process, the real ``corral`` command started
in a tmux pane of the bench's own, and corral's time to its first full, fresh instance
table set against ``lxc list`` of the same run."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: lab, lab_cluster


def add_root_option(parser, help: str = "use a lab started with `lab.py up --root`") -> None:
    parser.add_argument("--root", type=Path, help=help)


@contextlib.contextmanager
def lab_up(root: Path | None, cluster: str | None = None):
    """The lab (or, with ``cluster``, that kind of cluster) recorded under ``root``, or with
    no ``root`` a private one started here and stopped on the way out."""
    if cluster is None:
        import lab as labmod

        make, records = labmod.Lab, labmod.Lab.from_records
    else:
        import lab_cluster

        make, records = (lambda: lab_cluster.Cluster(cluster)), lab_cluster.Cluster.from_records
    own = root is None
    lab = make() if own else records(root)
    if own:
        lab.start()
    try:
        yield lab
    finally:
        if own:
            lab.stop()


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU time the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_percent(pid: int, seconds: float) -> float:
    """The share of one core the process ``pid`` uses over the next ``seconds``."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0) * 100


def time_lxc_list(env: dict[str, str], remotes: list[str], repeats: int = 5) -> float:
    """Median seconds of `lxc list REMOTE --format csv` over ``remotes``, one after the
    other (as a user would)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for remote in remotes:
            subprocess.run(["lxc", "list", remote, "--format", "csv"], env=env, check=True,
                           capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


_launches = itertools.count()
ROOT = Path(__file__).resolve().parents[2]
TMUX = ("tmux", "-L", f"corral-bench-{os.getpid()}")
"""A tmux server of the bench's own: a shared one would start corral with the environment
it was started with (the lab's variables would not reach it)."""


class Control:
    """One tmux control-mode client for every launch and look at the pane: a command is a
    line on its stdin, no process per look. (``tmux capture-pane`` run 140 times a second
    took a quarter of a core by itself, on a machine whose two cores also run corral and
    the three daemons answering it: the observer slowed what it measured.)"""

    def __init__(self, env: dict[str, str]) -> None:
        # Attached to a session of its own, so it sizes no other; the server it starts
        # passes ``env`` on to every session.
        self.proc = subprocess.Popen(
            [*TMUX, "-C", "new-session", "-s", "bench-control", "-x", "80", "-y", "24",
             "sleep 100000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            text=True, bufsize=1)
        self.command("refresh-client -f no-output")

    def command(self, line: str) -> list[str]:
        """Run one tmux command; its output lines (raises on ``%error``)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out: list[str] = []
        inside = False
        for raw in self.proc.stdout:
            text = raw.rstrip("\n")
            if not inside:
                inside = text.startswith("%begin")
                continue  # notifications between answers (and the first, to new-session)
            if text.startswith("%end") or text.startswith("%error"):
                if text.startswith("%error"):
                    raise RuntimeError(f"tmux: {line}: {' '.join(out)}")
                return out
            out.append(text)
        raise RuntimeError("the tmux control client ended")

    def close(self) -> None:
        """End the client and the bench's tmux server (killing the client alone left the
        server, its control session and its ``sleep`` running for a day)."""
        subprocess.run([*TMUX, "kill-server"], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        self.proc.kill()
        self.proc.wait()
        end = time.monotonic() + 10  # gone, so that the next client can name its session
        while time.monotonic() < end and subprocess.run(
                [*TMUX, "list-sessions"], capture_output=True).returncode == 0:
            time.sleep(0.05)


def start_corral(control: "Control", cfg: Path, what: str) -> tuple[str, float]:
    """Start the ``corral`` command in a new tmux session; (session, start time)."""
    session = f"corral-{what}-{os.getpid()}-{next(_launches)}"
    corral = str(ROOT / ".venv" / "bin" / "corral")
    t0 = time.perf_counter()
    control.command(f"new-session -d -s {session} -x 160 -y 45 "
                    f"'{corral} --config {cfg}'")
    return session, t0


def quit_corral(control: "Control", session: str, *first: str) -> None:
    """Send ``first`` (then ``q``), let corral save its cache and quit, end the session."""
    for key in first:
        control.command(f"send-keys -t {session} {key}")
        time.sleep(0.3)  # a lone Esc followed at once by q would be alt+q
    control.command(f"send-keys -t {session} q")
    end = time.monotonic() + 15
    while time.monotonic() < end and subprocess.run(
            [*TMUX, "has-session", "-t", session], stderr=subprocess.DEVNULL).returncode == 0:
        time.sleep(0.05)
    subprocess.run([*TMUX, "kill-session", "-t", session], check=False,
                   stderr=subprocess.DEVNULL)


def time_first_table(cfg: Path, env, n: int, repeats: int = 5,
                     timeout: float = 60.0) -> list[float]:
    """Seconds from starting the ``corral`` command (a fresh process, config ``cfg``, in a
    160x45 tmux pane) until its table counts ``n`` instances, every one fresh: no remote
    says ``refreshing`` or ``connecting``. Each run is cold (an empty inventory cache: no
    rows of the last run), so the rows are the daemons' answers of this run."""
    env = dict(env)
    cache = Path(env.get("TMPDIR", "/tmp")) / f"corral-bench-cache-{os.getpid()}"
    env["XDG_CACHE_HOME"] = str(cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # installed corral has its bytecode
    control = Control(env)
    total = re.compile(rf"Instances \({n}\)")
    out = []
    try:
        for _ in range(repeats):
            shutil.rmtree(cache, ignore_errors=True)
            session, t0 = start_corral(control, cfg, "first")
            try:
                while True:
                    now = time.perf_counter() - t0
                    screen = "\n".join(control.command(f"capture-pane -p -t {session}"))
                    if total.search(screen) and "refreshing" not in screen \
                            and "connecting" not in screen and "last run" not in screen:
                        out.append(now)
                        break
                    if now > timeout:
                        raise RuntimeError(f"no full, fresh table of {n} in {timeout:g} s:\n"
                                           f"{screen}")
                    time.sleep(0.005)
            finally:
                quit_corral(control, session)
    finally:
        control.close()
        shutil.rmtree(cache, ignore_errors=True)
    return out


def print_first_table(first: list[float], lxc_list: float, lxc_label: str) -> None:
    """corral's first full table (median and all runs) against `lxc list` and their ratio;
    ``lxc_label`` says which `lxc list` (padded to line up)."""
    corral_first = statistics.median(first)
    print(f"first full table, corral (median of {len(first)}, a fresh process each, cold, "
          f"rows fresh): {corral_first*1000:7.0f} ms"
          f"   (all: {', '.join(f'{t*1000:.0f}' for t in first)})")
    print(f"{lxc_label}{lxc_list*1000:7.0f} ms")
    print(f"ratio corral / lxc list: {corral_first / lxc_list:.2f}  (target <= 0.5)")
