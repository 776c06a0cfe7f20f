#!/usr/bin/env python3
"""Real LXD/Incus daemons for corral's tests: two LXD daemons and one Incus daemon.

Everything lives under one root dir (a temp dir by default): the daemons' dirs, a temp HOME with
the `lxc`/`incus` CLI configs, the busybox test image. Nothing touches a system daemon or the
user's own configs. Needs root and the Debian packages from scripts/setup-lab.sh.

    with Lab() as lab:
        lab.lxd1.cli("launch", "busybox", "c1")
        subprocess.run(["corral"], env=lab.env())

Command line (manual tmux testing, benchmarks):

    python tests/lab.py up --root DIR     # start, write DIR/env.sh and DIR/lab.json, leave running
    python tests/lab.py down --root DIR   # stop the daemons recorded in DIR/lab.json
    python tests/lab.py up --cluster lxd --root DIR   # a 3-member LXD (or incus) cluster instead

docs/lab.md explains the quirks this works around. Stdlib + PyYAML only.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

__all__ = ["Daemon", "Lab", "LabError", "CliError", "unavailable_reason", "build_busybox_image"]

DAEMON_NAMES = ("lxd1", "lxd2", "incus1")
LXD2_REMOTE = "lab2"  # remote name of lxd2 in Lab.lxd_conf
INCUS1_REMOTE = "inc1"  # remote name of incus1 in Lab.incus_conf
TRUST_NAME = "corral-test"
IMAGE_ALIAS = "busybox"
# Fixed timestamps make the image (and so its fingerprint) reproducible on one machine.
IMAGE_EPOCH = 1700000000
GRACEFUL_TIMEOUT = 15  # seconds for `lxd shutdown` / `incus admin shutdown` before SIGKILL
READY_TIMEOUT = 60
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the NUL


class LabError(RuntimeError):
    """The lab could not be started/used; the message says why (with the daemon log tail)."""


class CliError(LabError):
    def __init__(self, cmd: list[str], proc: subprocess.CompletedProcess):
        self.cmd = cmd
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        super().__init__(
            f"{shlex.join(cmd)} failed (rc={proc.returncode}): "
            f"{(proc.stderr or '').strip() or (proc.stdout or '').strip()}"
        )


# --------------------------------------------------------------------------------------------
# small helpers


def _clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of base (default os.environ) without any LXD_*/INCUS_* variable."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key.startswith(("LXD_", "INCUS_")):
            del env[key]
    return env


def _pid_alive(pid: int | None) -> bool:
    """True if pid runs and is not a zombie (PID 1 here reaps orphans lazily)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[0:1]
    return bool(state) and state[0] not in ("Z", "X")


def _read_proc(pid: int, what: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{what}").read_bytes()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    stat = _read_proc(pid, "stat").decode(errors="replace")
    try:
        return int(stat.rpartition(")")[2].split()[1])
    except (IndexError, ValueError):
        return 0


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _wait_dead(pids: set[int] | list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not any(_pid_alive(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _unescape_mount(path: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 3 < len(path) and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below root (deepest first)."""
    root_s = str(root).rstrip("/")
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        mp = _unescape_mount(fields[4])
        if mp == root_s or mp.startswith(root_s + "/"):
            found.append(mp)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def unmount_under(root: Path) -> list[str]:
    """Lazily unmount everything at or below root; returns what was unmounted."""
    done = []
    for _ in range(10):  # stacked mounts need more than one pass
        mps = mounts_under(root)
        if not mps:
            break
        for mp in mps:
            r = subprocess.run(["umount", "-l", mp], capture_output=True, text=True)
            if r.returncode == 0:
                done.append(mp)
    return done


def _cgroup_mounts() -> list[str]:
    out = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            pre, _, post = line.partition(" - ")
            if post.split()[:1] and post.split()[0] in ("cgroup", "cgroup2"):
                out.append(_unescape_mount(pre.split()[4]))
    except OSError:
        pass
    return out


def _rmdir_cgroups(paths: set[str], timeout: float = 3.0) -> None:
    """Remove (empty) cgroups that killed LXC monitors/payloads left behind.

    rmdir fails with EBUSY until the killed tasks are reaped, and PID 1 on these machines reaps
    orphans lazily: retry for a while.
    """
    if not paths:
        return
    deadline = time.monotonic() + timeout
    while True:
        remaining = False
        for mount in _cgroup_mounts():
            for rel in paths:
                top = Path(mount) / rel.lstrip("/")
                if not top.is_dir():
                    continue
                for dirpath, _dirs, _files in os.walk(top, topdown=False):
                    try:
                        os.rmdir(dirpath)
                    except OSError:
                        remaining = True
        if not remaining or time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _free_port(_lock=threading.Lock(), _given: set[int] = set()) -> int:  # noqa: B006, B008 - shared on purpose
    with _lock:
        for _ in range(50):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _given:
                _given.add(port)
                return port
    raise LabError("no free TCP port on 127.0.0.1")


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"<no log: {e}>"
    return "\n".join(text.splitlines()[-lines:])


def parse_trust_token(output: str) -> tuple[str, dict]:
    """Token from `lxc config trust add --name N` / `incus config trust add N` output.

    Both print "Client N certificate add token:" and the base64 JSON token on the next line.
    """
    for line in reversed([ln.strip() for ln in output.splitlines() if ln.strip()]):
        try:
            data = json.loads(base64.b64decode(line + "=" * (-len(line) % 4), validate=True))
        except Exception:  # not the token line
            continue
        if isinstance(data, dict) and {"fingerprint", "secret", "addresses"} <= data.keys():
            return line, data
    raise LabError(f"no trust token in output: {output!r}")


def _incusd_path() -> str | None:
    for cand in (
        shutil.which("incusd"),
        "/usr/libexec/incus/incusd",
        "/usr/lib/incus/incusd",
        "/opt/incus/bin/incusd",
    ):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _busybox_path() -> str | None:
    for cand in ("/bin/busybox", "/usr/bin/busybox", shutil.which("busybox")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def unavailable_reason(kinds: tuple[str, ...] = ("lxd", "incus")) -> str | None:
    """Why a Lab cannot run on this machine (None if it can). For the failure that says so (never a skip)."""
    if os.geteuid() != 0:
        return "the LXD/Incus lab needs root"
    needed = {"busybox (busybox-static)": _busybox_path()}
    if "lxd" in kinds:
        needed["lxd"] = shutil.which("lxd")
        needed["lxc (lxd-client)"] = shutil.which("lxc")
    if "incus" in kinds:
        needed["incusd (incus)"] = _incusd_path()
        needed["incus (incus-client)"] = shutil.which("incus")
    missing = [k for k, v in needed.items() if not v]
    if missing:
        return "missing " + ", ".join(missing) + " (run scripts/setup-lab.sh)"
    return None


# --------------------------------------------------------------------------------------------
# the busybox image


def build_busybox_image(workdir: Path, busybox: str | None = None) -> Path:
    """Build an LXD/Incus unified image (metadata.yaml + rootfs/) of busybox-static.

    Returns workdir/busybox.tar.gz. Reproducible: fixed creation_date, mtimes, owners, order.
    """
    busybox = busybox or _busybox_path()
    if not busybox:
        raise LabError("busybox not found (apt-get install busybox-static)")
    workdir.mkdir(parents=True, exist_ok=True)
    rootfs = workdir / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    for d in ("bin", "sbin", "dev", "proc", "sys", "tmp", "etc", "root"):
        (rootfs / d).mkdir(parents=True)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "root").chmod(0o700)
    shutil.copyfile(busybox, rootfs / "bin" / "busybox")
    (rootfs / "bin" / "busybox").chmod(0o755)
    listing = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    for applet in sorted(set(listing.stdout.split())):
        if "/" in applet or applet in ("busybox", "."):
            continue
        (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "sbin" / "init").symlink_to("../bin/busybox")
    etc = rootfs / "etc"
    (etc / "inittab").write_text("::sysinit:/bin/mount -t proc proc /proc\n::respawn:/bin/sh\n")
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "shadow").write_text("root::19000:0:99999:7:::\n")
    (etc / "shadow").chmod(0o600)
    (etc / "group").write_text("root:x:0:\n")
    (etc / "hostname").write_text("busybox\n")
    metadata = {
        "architecture": "x86_64",
        "creation_date": IMAGE_EPOCH,
        "properties": {
            "os": "busybox",
            "release": "1",
            "architecture": "x86_64",
            "description": "busybox (corral test image)",
        },
    }
    (workdir / "metadata.yaml").write_text(yaml.safe_dump(metadata, sort_keys=False))

    def norm(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mtime = IMAGE_EPOCH
        return ti

    tarball = workdir / "busybox.tar.gz"
    tmp = tarball.with_suffix(".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0
    ) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(workdir / "metadata.yaml", arcname="metadata.yaml", filter=norm)
        paths = [rootfs, *sorted(rootfs.rglob("*"))]
        for p in paths:
            tar.add(p, arcname=str(p.relative_to(workdir)), recursive=False, filter=norm)
    tmp.replace(tarball)
    return tarball


# --------------------------------------------------------------------------------------------
# one daemon


class Daemon:
    """One private LXD or Incus daemon with its own dir, unix socket and HTTPS address."""

    def __init__(self, kind: str, name: str, dir: Path, admin_conf: Path, admin_home: Path):
        if kind not in ("lxd", "incus"):
            raise ValueError(f"kind must be 'lxd' or 'incus', not {kind!r}")
        self.kind = kind
        self.name = name
        self.dir = Path(dir)
        self.socket = self.dir / "unix.socket"
        self.log = self.dir / "daemon.log"
        self.admin_conf = Path(admin_conf)  # private LXD_CONF/INCUS_CONF for cli()
        self.admin_home = Path(admin_home)
        self.https_address = ""
        self.fingerprint = ""
        self.cert_pem = ""
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._set_up = False

    # -- names of things
    @property
    def dir_var(self) -> str:
        return "LXD_DIR" if self.kind == "lxd" else "INCUS_DIR"

    @property
    def conf_var(self) -> str:
        return "LXD_CONF" if self.kind == "lxd" else "INCUS_CONF"

    @property
    def client(self) -> str:
        return "lxc" if self.kind == "lxd" else "incus"

    def _daemon_cmd(self) -> list[str]:
        if self.kind == "lxd":
            return [shutil.which("lxd") or "lxd", "--group", "root"]
        incusd = _incusd_path()
        if not incusd:
            raise LabError("incusd not found (install incus from bookworm-backports)")
        return [incusd, "--group", "root"]

    def _admin_cmd(self, *args: str) -> list[str]:
        # `lxd waitready` / `incus admin waitready` etc.
        if self.kind == "lxd":
            return [shutil.which("lxd") or "lxd", *args]
        return [shutil.which("incus") or "incus", "admin", *args]

    def _env(self) -> dict[str, str]:
        env = _clean_env()
        env[self.dir_var] = str(self.dir)
        env[self.conf_var] = str(self.admin_conf)
        env["HOME"] = str(self.admin_home)
        return env

    def __repr__(self) -> str:
        return f"<Daemon {self.name} {self.kind} pid={self.pid} {self.https_address or '-'}>"

    # -- the CLI
    def delete(self, name: str) -> None:
        """``delete --force NAME``; one that is gone already is fine."""
        proc = self.cli("delete", "--force", name, check=False)
        if proc.returncode != 0 and "not found" not in proc.stderr.lower():
            raise CliError([self.client, "delete", "--force", name], proc)

    BUSY = ("has snapshots", "is busy running")
    """What a daemon says of an instance that is still finishing an operation it reported
    done, or one running beside (LXD 5.0.2: "Cannot remove an instance volume that has
    snapshots" just after a snapshot; "Instance is busy running a "stop" operation" when
    ``delete --force`` meets the stop it asked for itself, on a loaded machine)."""

    def cli(
        self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess:
        """Run `lxc ARGS` / `incus ARGS` against this daemon's unix socket (admin config).
        A ``delete`` the daemon refuses as busy (:attr:`BUSY`) is tried again for up to
        five seconds: every test's clean-up goes through here."""
        cmd = [self.client, *map(str, args)]
        kw: dict = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        for attempt in range(20):
            proc = subprocess.run(
                cmd, env=self._env(), capture_output=True, text=True, timeout=timeout, **kw
            )
            if proc.returncode == 0 or not args or args[0] != "delete" or attempt == 19 \
                    or not any(busy in proc.stderr for busy in self.BUSY):
                break
            time.sleep(0.25)
        if check and proc.returncode != 0:
            raise CliError(cmd, proc)
        return proc

    def trust_token(self, name: str = TRUST_NAME) -> str:
        """Issue a fresh trust token (`config trust add`) and return it."""
        if self.kind == "lxd":
            out = self.cli("config", "trust", "add", "--name", name).stdout
        else:
            out = self.cli("config", "trust", "add", name).stdout
        token, data = parse_trust_token(out)
        if self.fingerprint and data["fingerprint"] != self.fingerprint:
            raise LabError(f"{self.name}: token fingerprint {data['fingerprint']} != server {self.fingerprint}")
        return token

    # -- process state
    def alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self.pid)

    def _owns_pid(self, pid: int) -> bool:
        """pid is this daemon (guards against pid reuse when stopping by a recorded pid)."""
        environ = _read_proc(pid, "environ").split(b"\0")
        return f"{self.dir_var}={self.dir}".encode() in environ

    # -- start / stop
    def start(self) -> None:
        """Start the daemon and wait until ready; the first start also sets it up."""
        if self.alive():
            return
        try:
            self._spawn()
            self._wait_ready()
            if not self._set_up:
                self._setup()
                self._set_up = True
            else:
                self._read_cert()
        except BaseException as e:
            self.stop()
            raise LabError(
                f"{self.name}: start failed: {e}\n--- {self.log} (tail) ---\n{_tail(self.log)}"
            ) from e

    def _spawn(self) -> None:
        if len(str(self.socket)) > SOCKET_PATH_MAX - 10:
            raise LabError(f"{self.name}: dir path too long for a unix socket: {self.dir}")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o711)
        self.admin_conf.mkdir(parents=True, exist_ok=True)
        self.admin_home.mkdir(parents=True, exist_ok=True)
        env = self._env()
        with open(self.log, "ab") as log:
            log.write(f"--- corral lab: starting {self.name} at {time.ctime()}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._daemon_cmd(),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session: survives us, gets none of our signals
                cwd=self.dir,
            )
        self.pid = self._proc.pid

    def _wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        waiter = subprocess.Popen(
            self._admin_cmd("waitready", "--timeout", str(int(timeout))),
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + timeout + 5
        try:
            while waiter.poll() is None:
                if not self.alive():
                    raise LabError(f"daemon exited (rc={self._proc and self._proc.returncode}) before ready")
                if time.monotonic() > deadline:
                    raise LabError(f"not ready after {timeout}s")
                time.sleep(0.05)
            if waiter.returncode != 0:
                raise LabError(f"waitready failed: {waiter.stdout.read().strip()}")
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
            if waiter.stdout:
                waiter.stdout.close()

    def _setup(self) -> None:
        self.cli("storage", "create", "default", "dir")
        self.cli("profile", "device", "add", "default", "root", "disk", "path=/", "pool=default")
        for attempt in range(5):
            address = f"127.0.0.1:{_free_port()}"
            r = self.cli("config", "set", "core.https_address", address, check=attempt == 4)
            if r.returncode == 0:
                self.https_address = address
                break
        self._read_cert()

    def _read_cert(self) -> None:
        self.cert_pem = (self.dir / "server.crt").read_text()
        der = ssl.PEM_cert_to_DER_cert(self.cert_pem)
        self.fingerprint = hashlib.sha256(der).hexdigest()
        if not self.https_address:
            self.https_address = self.cli("config", "get", "core.https_address").stdout.strip()

    def kill(self) -> None:
        """SIGKILL the daemon (its containers keep running, as after a crash)."""
        pid = self.pid
        if not pid or not self.alive():
            return
        if self._proc is None and not self._owns_pid(pid):
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self._proc is not None:
            self._proc.wait()
        else:
            _wait_dead([pid], 10)

    def stop(self, timeout: float = GRACEFUL_TIMEOUT, force_instances: bool = False) -> None:
        """Clean shutdown (`lxd shutdown` / `incus admin shutdown`), SIGKILL if still alive.

        force_instances: first force-stop every running instance (all projects). Faster
        teardown, but the instances are then not restarted by a later start().
        Afterwards kills what a dead daemon left behind (LXC monitors, containers, fork helpers)
        and unmounts everything under the daemon's dir. Never raises.
        """
        try:
            if self.alive():
                if force_instances:
                    self._force_stop_instances(timeout=min(timeout, 10))
                t = max(1, int(timeout) - 3)  # + up to 3 s waiting for the pid below
                try:
                    subprocess.run(
                        self._admin_cmd("shutdown", "--timeout", str(t)),
                        env=self._env(),
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=timeout,
                    )
                except subprocess.TimeoutExpired:
                    pass
                if self._proc is not None:
                    try:
                        self._proc.wait(timeout=3)
                    except subprocess.TimeoutExpired:
                        pass
                else:
                    _wait_dead([self.pid], 3)
                if self.alive():
                    self.kill()
            elif self._proc is not None:
                self._proc.poll()
        except Exception as e:
            print(f"lab: {self.name}: stop: {e}", file=sys.stderr)
            try:
                self.kill()
            except Exception:
                pass
        try:
            self._kill_leftovers()
        except Exception as e:
            print(f"lab: {self.name}: leftover cleanup: {e}", file=sys.stderr)
        try:
            unmount_under(self.dir)
        except Exception as e:
            print(f"lab: {self.name}: unmount: {e}", file=sys.stderr)

    def _force_stop_instances(self, timeout: float) -> None:
        r = self.cli(
            "query", "/1.0/instances?all-projects=true&recursion=1", check=False, timeout=timeout
        )
        if r.returncode != 0:
            return
        try:
            instances = json.loads(r.stdout)
        except ValueError:
            return
        by_project: dict[str, list[str]] = {}
        for inst in instances:
            if inst.get("status") in ("Running", "Frozen"):
                by_project.setdefault(inst.get("project") or "default", []).append(inst["name"])
        for project, names in by_project.items():
            self.cli("stop", "--force", "--project", project, *names, check=False, timeout=timeout)

    def leftover_pids(self) -> set[int]:
        """Processes a dead daemon left: fork helpers, LXC monitors and their containers."""
        if self.alive():
            return set()
        marker = f"{self.dir_var}={self.dir}".encode()
        monitor = f"[lxc monitor] {self.dir}/".encode()
        roots = set()
        ppids: dict[int, int] = {}
        me = os.getpid()
        for pid in _all_pids():
            if pid == me:
                continue
            ppids[pid] = _ppid(pid)
            cmdline = _read_proc(pid, "cmdline")
            if cmdline.startswith(monitor):
                roots.add(pid)
                continue
            try:
                exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            except OSError:
                continue
            if exe.split(" ")[0] in ("lxd", "incusd") and marker in _read_proc(pid, "environ").split(b"\0"):
                roots.add(pid)
        found = set(roots)
        changed = True
        while changed:
            changed = False
            for pid, ppid in ppids.items():
                if ppid in found and pid not in found:
                    found.add(pid)
                    changed = True
        return {p for p in found if _pid_alive(p)}

    def _kill_leftovers(self) -> None:
        pids = self.leftover_pids()
        if not pids:
            return
        cgroups: set[str] = set()
        for pid in pids:
            for line in _read_proc(pid, "cgroup").decode(errors="replace").splitlines():
                path = line.split(":", 2)[-1]
                if path.lstrip("/").startswith("lxc."):
                    cgroups.add(path)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_dead(pids, 10)
        _rmdir_cgroups(cgroups)

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "dir": str(self.dir),
            "socket": str(self.socket),
            "pid": self.pid,
            "https_address": self.https_address,
            "fingerprint": self.fingerprint,
            "admin_conf": str(self.admin_conf),
            "admin_home": str(self.admin_home),
            "log": str(self.log),
        }

    @classmethod
    def from_json(cls, data: dict) -> Daemon:
        d = cls(data["kind"], data["name"], Path(data["dir"]), Path(data["admin_conf"]), Path(data["admin_home"]))
        d.pid = data.get("pid")
        d.https_address = data.get("https_address", "")
        d.fingerprint = data.get("fingerprint", "")
        d._set_up = True
        if d.pid and not (_pid_alive(d.pid) and d._owns_pid(d.pid)):
            d.pid = None  # gone, or the pid now belongs to someone else
        try:
            d.cert_pem = (d.dir / "server.crt").read_text()
        except OSError:
            pass
        return d


# --------------------------------------------------------------------------------------------
# the lab


def _run_parallel(fns: dict[str, Callable[[], None]]) -> dict[str, BaseException]:
    errors: dict[str, BaseException] = {}

    def wrap(name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as e:
            errors[name] = e

    threads = [threading.Thread(target=wrap, args=(n, f), name=f"lab-{n}") for n, f in fns.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


class Lab:
    """lxd1, lxd2 (LXD) and incus1 (Incus) under one root, plus a HOME with CLI configs.

    - lxd_conf: `lxc` config dir (= home/.config/lxc) with remote "lab2" -> lxd2 over HTTPS,
      written by the real `lxc remote add lab2 <token>`; its "local" remote is lxd1 via LXD_DIR.
    - incus_conf: `incus` config dir (= home/.config/incus) with remote "inc1" -> incus1,
      written by `incus remote add inc1 <token>`; its "local" remote is unreachable.
    - image alias "busybox" on all three daemons.
    """

    def __init__(self, root: Path | None = None):
        self._owns_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="corral-lab-")) if root is None else Path(root).absolute()
        admin = self.root / "admin"
        self.lxd1 = Daemon("lxd", "lxd1", self.root / "lxd1", admin / "lxd1", admin / "home")
        self.lxd2 = Daemon("lxd", "lxd2", self.root / "lxd2", admin / "lxd2", admin / "home")
        self.incus1 = Daemon("incus", "incus1", self.root / "incus1", admin / "incus1", admin / "home")
        self.daemons = [self.lxd1, self.lxd2, self.incus1]
        self.home = self.root / "home"
        self.xdg_config = self.home / ".config"
        self.lxd_conf = self.xdg_config / "lxc"
        self.incus_conf = self.xdg_config / "incus"
        self.runtime_dir = self.root / "run"
        self.image_dir = self.root / "image"
        self.image_tarball = self.image_dir / "busybox.tar.gz"
        self.image_fingerprint = ""
        self.timings: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<Lab {self.root} {self.daemons}>"

    # -- environment for corral
    def env_vars(self) -> dict[str, str]:
        """Only the lab's own variables (what env.sh exports)."""
        return {
            "HOME": str(self.home),
            "LXD_CONF": str(self.lxd_conf),
            "INCUS_CONF": str(self.incus_conf),
            "LXD_DIR": str(self.lxd1.dir),
            "XDG_CONFIG_HOME": str(self.xdg_config),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
        }

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Full environment to run corral against the lab: base (default os.environ) minus every
        LXD_*/INCUS_* variable (so INCUS_DIR is never set), plus env_vars()."""
        env = _clean_env(base)
        env.update(self.env_vars())
        return env

    # -- start / stop
    def start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise LabError(reason)
        t0 = time.monotonic()
        try:
            self._prepare_dirs()
            errors = _run_parallel(
                {
                    **{d.name: d.start for d in self.daemons},
                    "image": lambda: build_busybox_image(self.image_dir),
                }
            )
            self._raise(errors)
            self.timings["daemons"] = time.monotonic() - t0
            errors = _run_parallel(
                {
                    "lxd1": lambda: self._import_image(self.lxd1),
                    "lxd2": lambda: (self._import_image(self.lxd2), self._add_remote(self.lxd2, LXD2_REMOTE, self.lxd_conf)),
                    "incus1": lambda: (self._import_image(self.incus1), self._add_remote(self.incus1, INCUS1_REMOTE, self.incus_conf)),
                }
            )
            self._raise(errors)
            self.timings["total"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def _prepare_dirs(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name in (*DAEMON_NAMES, "admin", "home", "image", "run"):
            if (self.root / name).exists() and not self._owns_root:
                raise LabError(f"{self.root} already holds a lab ({name}); use an empty root")
        self.root.chmod(0o711)  # unprivileged containers must traverse to their rootfs
        for d in (self.home, self.xdg_config, self.home / ".local" / "share",
                  self.home / ".local" / "state", self.home / ".cache"):
            d.mkdir(parents=True, exist_ok=True)
        self.runtime_dir.mkdir(mode=0o700, exist_ok=True)

    @staticmethod
    def _raise(errors: dict[str, BaseException]) -> None:
        if not errors:
            return
        if len(errors) == 1:
            (name, err), = errors.items()
            if isinstance(err, LabError):
                raise err
            raise LabError(f"{name}: {err!r}") from err
        msg = "\n\n".join(f"[{n}] {e}" for n, e in errors.items())
        raise LabError(f"lab start failed:\n{msg}") from next(iter(errors.values()))

    def _import_image(self, d: Daemon) -> None:
        out = d.cli("image", "import", str(self.image_tarball), "--alias", IMAGE_ALIAS).stdout
        # "Image imported with fingerprint: <sha256>"
        fp = out.strip().rpartition(":")[2].strip()
        if fp:
            self.image_fingerprint = fp

    def _add_remote(self, d: Daemon, remote: str, conf: Path) -> None:
        token = d.trust_token(TRUST_NAME)
        cmd = [d.client, "remote", "add", remote, token]
        env = self.env()
        # Token add is non-interactive (the token carries the server fingerprint); stdin closed
        # so a prompt could never hang us.
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise CliError(cmd, r)
        config = yaml.safe_load((conf / "config.yml").read_text())
        got = (config.get("remotes") or {}).get(remote) or {}
        if got.get("addr") != f"https://{d.https_address}":
            raise LabError(f"{conf}/config.yml: remote {remote} is {got!r}, expected {d.https_address}")
        pinned = (conf / "servercerts" / f"{remote}.crt").read_text()
        if ssl.PEM_cert_to_DER_cert(pinned) != ssl.PEM_cert_to_DER_cert(d.cert_pem):
            raise LabError(f"{conf}/servercerts/{remote}.crt is not {d.name}'s certificate")
        cmd = [d.client, "list", f"{remote}:", "--format", "csv", "-c", "n"]
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise CliError(cmd, r)

    def stop(self) -> None:
        """Stop all daemons (also after a partial start), unmount, remove a temp root. Never raises."""
        t0 = time.monotonic()
        try:
            _run_parallel({d.name: (lambda d=d: d.stop(force_instances=True)) for d in self.daemons})
        except BaseException as e:
            print(f"lab: stop: {e}", file=sys.stderr)
        try:
            left = unmount_under(self.root)
            if left:
                print(f"lab: unmounted leftovers: {left}", file=sys.stderr)
        except BaseException as e:
            print(f"lab: unmount: {e}", file=sys.stderr)
        if self._owns_root:
            try:
                if not mounts_under(self.root):
                    shutil.rmtree(self.root, ignore_errors=True)
            except BaseException as e:
                print(f"lab: rmtree {self.root}: {e}", file=sys.stderr)
        self.timings["stop"] = time.monotonic() - t0

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- up / down records
    def to_json(self) -> dict:
        return {
            "root": str(self.root),
            "home": str(self.home),
            "lxd_conf": str(self.lxd_conf),
            "incus_conf": str(self.incus_conf),
            "image_tarball": str(self.image_tarball),
            "image_fingerprint": self.image_fingerprint,
            "remotes": {LXD2_REMOTE: "lxd2", INCUS1_REMOTE: "incus1"},
            "daemons": {d.name: d.to_json() for d in self.daemons},
            "env": self.env_vars(),
        }

    def write_records(self) -> None:
        (self.root / "lab.json").write_text(json.dumps(self.to_json(), indent=2) + "\n")
        lines = ["# corral lab: source this file to point lxc/incus/corral at the lab",
                 "unset INCUS_DIR INCUS_SOCKET LXD_SOCKET LXD_PROJECT INCUS_PROJECT"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.env_vars().items()]
        (self.root / "env.sh").write_text("\n".join(lines) + "\n")

    @classmethod
    def from_records(cls, root: Path) -> Lab:
        data = json.loads((Path(root) / "lab.json").read_text())
        lab = cls(Path(data["root"]))
        lab.daemons = [Daemon.from_json(data["daemons"][n]) for n in DAEMON_NAMES]
        lab.lxd1, lab.lxd2, lab.incus1 = lab.daemons
        lab.image_fingerprint = data.get("image_fingerprint", "")
        return lab


# --------------------------------------------------------------------------------------------
# command line


def _cmd_up(root: Path) -> int:
    root = root.absolute()
    leftovers = [root / n for n in (*DAEMON_NAMES, "admin", "home", "image", "run", "lab.json", "env.sh")]
    if any(p.exists() for p in leftovers):
        old = Lab.from_records(root) if (root / "lab.json").exists() else Lab(root)
        running = [d.name for d in old.daemons if d.alive()]
        if running:
            print(f"lab: {root} is already up ({', '.join(running)}); run `down` first", file=sys.stderr)
            return 1
        old.stop()  # kills what a crashed lab left, unmounts
        for p in leftovers:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    lab = Lab(root)
    try:
        lab.start()
    except LabError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 1
    lab.write_records()
    for d in lab.daemons:
        print(f"{d.name}: {d.kind} pid={d.pid} https://{d.https_address} dir={d.dir}")
    print(f"started in {lab.timings['total']:.1f}s; `source {root / 'env.sh'}`")
    return 0


def _cmd_down(root: Path) -> int:
    root = root.absolute()
    if not (root / "lab.json").exists():
        print(f"lab: no {root / 'lab.json'}", file=sys.stderr)
        return 1
    lab = Lab.from_records(root)
    t0 = time.monotonic()
    lab.stop()  # root is not owned: files stay for inspection
    print(f"stopped in {time.monotonic() - t0:.1f}s")
    for d in lab.daemons:
        d.pid = None
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("up", "down"):
        p = sub.add_parser(name)
        p.add_argument("--root", type=Path, required=True)
    sub.choices["up"].add_argument(
        "--cluster", choices=("lxd", "incus"),
        help="form a 3-member cluster of this kind (tests/lab_cluster.py) instead of the lab")
    args = ap.parse_args(argv)
    if args.cmd == "up" and args.cluster or args.cmd == "down" and (args.root / "cluster.json").exists():
        import lab_cluster

        if args.cmd == "up":
            return lab_cluster.cmd_up(args.root, args.cluster)
        return lab_cluster.cmd_down(args.root)
    return _cmd_up(args.root) if args.cmd == "up" else _cmd_down(args.root)


if __name__ == "__main__":
    sys.exit(main())
