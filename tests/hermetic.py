"""The test suite's hermetic environment and its socket guard.

Three layers keep every test away from the host's own daemons and files:

1. :func:`environment` - the one environment for app and backend set-ups: ``HOME``, every
   ``XDG_*`` directory, the LXD/Incus daemon dirs and their global config dirs all name
   paths inside the test's own temp dirs (the ``lxc``/``incus`` CLI configs follow ``HOME``).
   ``tests/conftest.py`` hands it out as the ``hermetic_env`` fixture and puts ``HOME``,
   ``XDG_RUNTIME_DIR``, ``LXD_DIR`` and ``INCUS_DIR`` of it into ``os.environ`` for every
   test, with every other such variable of the host removed.
2. :class:`FakeHost` - the system defaults code falls back to when an environment names
   nothing (``/var/lib/lxd/unix.socket``, ``/run/incus/unix.socket``, ``/etc/lxd``,
   ``/var/lib/lxc``, libvirt's ``/run/libvirt/*-sock`` ...) are redirected under a session temp dir, so an environment built
   by hand (``{"HOME": ...}``) cannot find a system LXD/Incus either. A test may put a daemon
   there to play "a host with a system LXD".
3. :class:`Guard` - ``socket.socket.connect``/``connect_ex`` (which asyncio's unix and TCP
   connections, ``requests`` and ``websockets`` all go through) refuse any address outside
   the lab and the test fails, naming the address and why. Allowed: unix sockets under
   pytest's temp dirs and under any temp-dir entry made during this session or named like the
   lab's (``corral-lab-*``, ``cq*``, ...); loopback TCP ports this process bound (the lab hands
   its daemons ports it bound first) or that nothing on the host listens on. Refused: the
   :class:`FakeHost` root, the real system sockets, every other path, abstract unix sockets,
   any non-loopback address, a loopback port some other process listens on.

   Subprocesses (the daemons, the ``lxc``/``incus`` CLIs, QEMU) are out of the guard's reach:
   only connections made inside the pytest process are checked. Layer 1 covers them as far
   as they honour the environment.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

# the real system locations corral (or a library) would fall back to
SYSTEM_SOCKETS = (
    "/var/lib/lxd/unix.socket",
    "/var/snap/lxd/common/lxd/unix.socket",
    "/var/lib/incus/unix.socket",
    "/run/incus/unix.socket",
    "/run/libvirt/libvirt-sock",
    "/run/libvirt/virtqemud-sock",
    "/var/run/libvirt/libvirt-sock",
    "/run/libvirt/libvirt-sock-ro",
)
LAB_PREFIXES = ("corral-lab-", "corral-lxd-cluster-", "corral-incus-cluster-", "cq",
                "pytest-of-", "corral-h-")


def environment(home: Path, runtime: Path) -> dict[str, str]:
    """Every variable that says where corral and the CLIs look, inside ``home``/``runtime``.

    The daemon dirs and global config dirs named here do not exist: a test that wants a
    daemon passes its own environment (``lab.env()``), or overrides ``LXD_DIR`` (a
    variable that loses to nothing else here, so ``{**env, "LXD_DIR": d}`` reaches ``d``).
    The CLI config dirs follow ``HOME`` and ``XDG_CONFIG_HOME`` by the CLIs' own rules."""
    nowhere = home / "no-system"
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(runtime),
        "LXD_DIR": str(nowhere / "lxd"),
        "INCUS_DIR": str(nowhere / "incus"),
        "LXD_GLOBAL_CONF": str(nowhere / "etc-lxd"),
        "INCUS_GLOBAL_CONF": str(nowhere / "etc-incus"),
    }


OS_VARS = ("HOME", "XDG_RUNTIME_DIR", "LXD_DIR", "INCUS_DIR")
"""What of :func:`environment` goes into ``os.environ`` for every test. The rest follows
from ``HOME`` there, so ``{**os.environ, "HOME": x}`` still means "the CLIs' configs under
x", as it did before the hermetic environment; the fake host covers the global configs."""

# variables of the host that must not leak into a test
HOST_VARS = ("LXD_DIR", "INCUS_DIR", "LXD_SOCKET", "INCUS_SOCKET", "LXD_CONF", "INCUS_CONF",
             "LXD_GLOBAL_CONF", "INCUS_GLOBAL_CONF", "LIBVIRT_DEFAULT_URI", "XDG_CONFIG_HOME",
             "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_DIRS",
             "XDG_DATA_DIRS")


def runtime_dir() -> Path:
    """A short private ``XDG_RUNTIME_DIR`` (unix socket paths must stay under 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="corral-h-", dir="/tmp"))


class FakeHost:
    """The host's system paths, moved under ``root``: ``path("/var/lib/lxd")``."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, system_path: str) -> Path:
        return self.root / system_path.lstrip("/")

    def install(self, patch) -> None:
        """Redirect the backends' fall-back defaults here; ``patch`` is a MonkeyPatch."""
        from backends import local, remotes

        # the system candidates in the order remotes.py tries them, tried on the fake host
        # (never on the real one: the result must not depend on what this host runs)
        for name, overrides, candidates in (
                ("lxd_socket_path", ("LXD_SOCKET", "LXD_DIR"),
                 ("/var/snap/lxd/common/lxd/unix.socket", "/var/lib/lxd/unix.socket")),
                ("incus_socket_path", ("INCUS_SOCKET", "INCUS_DIR"),
                 ("/run/incus/unix.socket", "/var/lib/incus/unix.socket"))):
            patch.setattr(remotes, name,
                          self._rerooted(getattr(remotes, name), overrides, candidates))
        flavour = remotes._flavour

        def _flavour(kind, env, out, *args, **kwargs):
            env = dict(env)
            env.setdefault("LXD_GLOBAL_CONF", str(self.path("/etc/lxd")))
            env.setdefault("INCUS_GLOBAL_CONF", str(self.path("/etc/incus")))
            return flavour(kind, env, out, *args, **kwargs)

        patch.setattr(remotes, "_flavour", _flavour)
        # libvirt's qemu:///system, found by its socket (libvirt connects from C: the
        # socket guard cannot see it, so discovery must not find the host's)
        if hasattr(remotes, "LIBVIRT_SYSTEM_SOCKETS"):
            patch.setattr(remotes, "LIBVIRT_SYSTEM_SOCKETS",
                          tuple(str(self.path(p)) for p in remotes.LIBVIRT_SYSTEM_SOCKETS))
        lxcpath = local.default_lxcpath

        def default_lxcpath() -> str:
            path = lxcpath()
            return str(self.path(path)) if path == "/var/lib/lxc" else path

        patch.setattr(local, "default_lxcpath", default_lxcpath)

    def _rerooted(self, fn, overrides, candidates):
        def wrapper(env):
            if any(env.get(v) for v in overrides):
                return fn(env)
            for path in candidates[:-1]:
                if os.path.exists(self.path(path)):
                    return str(self.path(path))
            return str(self.path(candidates[-1]))

        wrapper.__wrapped__ = fn
        return wrapper


class Violation(PermissionError):
    """A connection the guard refused."""


class Guard:
    """Refuses connections outside the lab (see the module docstring) and remembers them."""

    def __init__(self, denied: list[Path]):
        self.denied = [Path(os.path.realpath(p)) for p in denied]
        self.allowed: list[Path] = []
        self.ports: set[int] = set()
        self.tmps = {os.path.realpath(d) for d in {tempfile.gettempdir(), "/tmp"}}
        self.at_start = {t: set(os.listdir(t)) for t in self.tmps}
        self.violations: list[str] = []
        self.expecting = 0
        self._lock = threading.Lock()
        self._saved: dict[str, object] = {}

    # -- allow-list, for harness code that opens something the rules do not see
    def allow_path(self, path: str | os.PathLike) -> None:
        self.allowed.append(Path(os.path.realpath(path)))

    def allow_port(self, port: int) -> None:
        self.ports.add(int(port))

    # -- installing
    def install(self) -> None:
        cls = socket.socket
        self._saved = {n: cls.__dict__.get(n) for n in ("connect", "connect_ex", "bind")}
        real_connect, real_connect_ex, real_bind = cls.connect, cls.connect_ex, cls.bind
        guard = self

        def connect(sock, address):
            guard.check(sock, address)
            return real_connect(sock, address)

        def connect_ex(sock, address):
            guard.check(sock, address)
            return real_connect_ex(sock, address)

        def bind(sock, address):
            result = real_bind(sock, address)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    guard.ports.add(sock.getsockname()[1])
            return result

        cls.connect, cls.connect_ex, cls.bind = connect, connect_ex, bind

    def uninstall(self) -> None:
        for name, value in self._saved.items():
            if value is None:
                with contextlib.suppress(AttributeError):
                    delattr(socket.socket, name)
            else:
                setattr(socket.socket, name, value)

    # -- per test
    def take(self) -> list[str]:
        with self._lock:
            got, self.violations = self.violations, []
        return got

    @contextlib.contextmanager
    def expect(self) -> Iterator[list[str]]:
        """For the guard's own tests: the violations inside the block are returned, not failed."""
        before = self.take()
        caught: list[str] = []
        try:
            yield caught
        finally:
            caught += self.take()
            with self._lock:
                self.violations = before + self.violations

    # -- the rules
    def check(self, sock: socket.socket, address) -> None:
        reason = self.refusal(sock.family, address)
        if reason is None:
            return
        message = (f"test socket guard: blocked a connection to {reason}. Tests reach only "
                   "their own lab (tests/hermetic.py says what is allowed; harness code "
                   "can add a path or port with hermetic.GUARD.allow_path/allow_port).")
        with self._lock:
            self.violations.append(message)
        raise Violation(errno.EACCES, message)

    def refusal(self, family: int, address) -> str | None:
        """None when ``address`` is inside the lab, else the address and why not, in words."""
        if family == socket.AF_UNIX:
            return self._unix(address)
        if family in (socket.AF_INET, socket.AF_INET6):
            return self._tcp(address)
        return None

    def _unix(self, address) -> str | None:
        if isinstance(address, bytes):
            address = address.decode(errors="replace")
        if not address or address[0] == "\0":
            return f"the abstract unix socket {address!r} (a name shared by the whole host)"
        path = Path(os.path.realpath(address))
        for d in self.denied:
            if path == d or d in path.parents:
                return (f"the unix socket {address}: it is under {d}, where the host's own "
                        "daemons live (a fake host path stands for a system daemon)")
        if str(path) in SYSTEM_SOCKETS or address in SYSTEM_SOCKETS:
            return f"the unix socket {address}: a system daemon's socket"
        if any(path == d or d in path.parents for d in self.allowed):
            return None
        for tmp in self.tmps:
            try:
                top = path.relative_to(tmp).parts[0]
            except (ValueError, IndexError):
                continue
            if top.startswith(".") or top == f"corral-{os.geteuid()}":
                break  # /tmp/.X11-unix, the user's own corral runtime dir
            if top not in self.at_start[tmp] or top.startswith(LAB_PREFIXES):
                return None
        return (f"the unix socket {address}: it is not under pytest's temp dirs nor under a "
                "temp dir this test session made")

    def _tcp(self, address) -> str | None:
        host, port = address[0], int(address[1])
        try:
            ips = [ipaddress.ip_address(host.split("%")[0])]
        except ValueError:
            try:
                ips = [ipaddress.ip_address(a[4][0].split("%")[0])
                       for a in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)]
            except (OSError, ValueError):
                return None  # nothing to reach: the connection fails the same way
        where = f"{host}:{port}"
        for ip in ips:
            mapped = getattr(ip, "ipv4_mapped", None)
            if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
                return f"{where}: not a loopback address (the lab lives on 127.0.0.1)"
        if port in self.ports or port not in listening_ports():
            return None
        return (f"{where}: a loopback port this test session did not open, and another process "
                "on the host listens on it (a host service or another session's daemon)")


def listening_ports() -> set[int]:
    """TCP ports some socket on this host listens on (from /proc/net/tcp and tcp6)."""
    ports: set[int] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


GUARD: Guard | None = None
"""The session's guard (set by tests/conftest.py)."""
