"""SSH for a ``qemu+ssh://`` remote: one OpenSSH ControlMaster per host, owned by corral,
and byte streams through it to what listens on the server (a domain's VNC screen).

- **The master.** ``ssh -M -N -S <ctl>`` with the URI's user, port and key file, in batch
  mode (no prompt ever), started by corral as its child and ended when the last remote
  using it closes, or when corral ends (``setpriv --pdeathsig``: the kernel ends it even if
  corral is killed). Its control socket is private: ``<runtime dir>/ssh/<host hash>-<pid>-<n>``
  (the directory is 0700). The pid in the name keeps two corrals apart, ``n`` one master
  from the next in a process; the sockets (and masters) of corral processes that are gone
  are removed before a master starts, and a socket left at a master's own path (a killed
  master's, or a reused pid's) is replaced, so a stale one never breaks a start.
- **libvirt through it.** Every SSH URI runs libvirt's ``ssh`` transport (``uri.py``: never
  its in-process libssh client); corral names a small wrapper with the URI's ``command=``
  parameter, which runs ``ssh -S <ctl> -o ControlMaster=no`` with libvirt's arguments:
  libvirt's transport is a session of the master, so the host has one TCP connection and
  one authentication (the user's ``~/.ssh/config`` is read as ssh always does; corral
  writes nothing there).
- **Pinned keys.** ``known_hosts=<file>`` in the URI (which libvirt's ``ssh`` ignores) is
  applied by corral: the master, and the wrapper should it ever connect by itself, run with
  ``UserKnownHostsFile=<file>``, ``StrictHostKeyChecking=yes`` and no global file: a key
  not in that file, or another one than it pins, is refused, never added.
- **Streams.** OpenSSH 9.2's ``ssh -W`` forwards to ``host:port`` only (given a path it
  forwards nothing), so a stream is a forwarding asked of the master (``-O forward -L
  <private socket>:<target>``; the target a unix socket path on the server or
  ``host:port``), connected once and cancelled at once: the connected socket is the stream,
  carried by the master's connection (no new TCP connection, no process per stream).

A refused host key, a refused key, a password the server wants: said in words from ssh's
own, never waited for (``BatchMode=yes``; the start is bounded by the remote's time-out).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import shlex
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import AuthError, BackendError, NotResponding, OperationFailed, Unreachable
from ..paths import private_file, runtime_dir
from .uri import SSH_TRANSPORTS, split_scheme, ssh_query


@dataclass(frozen=True)
class Destination:
    """How the ssh program reaches a remote's host, as the URI says."""

    host: str
    user: str = ""
    port: str = ""
    keyfile: str = ""
    known_hosts: str = ""
    """The file the host key is pinned to (``known_hosts=``); "" for ssh's own files."""
    strict: bool = True
    """False when the URI switches host key checks off (``no_verify=1``, or libssh's
    ``known_hosts_verify=ignore``), as libvirt would."""

    @property
    def shown(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + (
            f":{self.port}" if self.port else "")

    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:12]

    def options(self) -> list[str]:
        """ssh's options for the URI: user, port, key, host key checks, no prompt."""
        opts = ["-o", "BatchMode=yes"]
        if self.user:
            opts += ["-l", self.user]
        if self.port:
            opts += ["-p", self.port]
        if self.keyfile:
            opts += ["-i", _literal(self.keyfile)]
        return opts + self.host_key_options()

    def host_key_options(self) -> list[str]:
        """How ssh checks the host key: pinned to ``known_hosts`` (strictly), or not."""
        opts: list[str] = []
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={_quoted(self.known_hosts)}",
                     "-o", "GlobalKnownHostsFile=/dev/null"]
        if not self.strict:
            opts += ["-o", "StrictHostKeyChecking=no"]
        elif self.known_hosts:
            opts += ["-o", "StrictHostKeyChecking=yes"]
        return opts


def _literal(path: str) -> str:
    """A path as ssh takes it in options that expand ``%`` tokens."""
    return path.replace("%", "%%")


def _quoted(path: str) -> str:
    path = _literal(path)
    return f'"{path}"' if any(c.isspace() for c in path) else path


def destination(uri: str) -> Destination | None:
    """Where an SSH URI leads (None for a URI that is not SSH: local, TCP, TLS)."""
    _driver, transport = split_scheme(uri)
    if transport not in SSH_TRANSPORTS:
        return None
    parts = urlsplit(uri)
    query = ssh_query(uri)
    return Destination(host=parts.hostname or "localhost", user=parts.username or "",
                       port=str(parts.port or ""), keyfile=query.get("keyfile", ""),
                       known_hosts=query.get("known_hosts", ""),
                       strict=query.get("no_verify", "0") in ("", "0"))


def _ssh() -> str:
    found = shutil.which("ssh")
    if found is None:
        raise Unreachable("The ssh program is not installed (OpenSSH's client): corral "
                          "needs it for qemu+ssh:// remotes.")
    return found


_DEATHSIG: list[list[str]] = []


async def _deathsig() -> list[str]:
    """``setpriv --pdeathsig TERM --`` when util-linux has it (2.33 and later; asked once):
    the master ends with corral even when corral is killed (the signal follows the thread
    that started it: asyncio starts subprocesses on the loop's thread, which lives as long
    as corral). Without it the master ends when corral closes its remotes."""
    if not _DEATHSIG:
        setpriv = shutil.which("setpriv")
        found: list[str] = []
        if setpriv:
            with contextlib.suppress(OSError):
                proc = await asyncio.create_subprocess_exec(
                    setpriv, "--help", stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
                try:
                    out, _err = await asyncio.wait_for(proc.communicate(), 5)
                except asyncio.TimeoutError:
                    proc.kill()
                    out, _err = await proc.communicate()
                if b"--pdeathsig" in out:
                    found = [setpriv, "--pdeathsig", "TERM", "--"]
        _DEATHSIG.append(found)
    return _DEATHSIG[0]


def _key_lookup_name(dest: Destination) -> str:
    """The host as ``known_hosts`` lists it (``[host]:port`` for a port other than 22)."""
    return f"[{dest.host}]:{dest.port}" if dest.port and dest.port != "22" else dest.host


async def pinned_line(dest: Destination) -> bool | None:
    """Whether the pinned file has a line for the host (``ssh-keygen -F``, which reads
    hashed lines too); None when there is no pinned file or it cannot be read."""
    keygen = shutil.which("ssh-keygen")
    if not dest.known_hosts or keygen is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            keygen, "-F", _key_lookup_name(dest), "-f", dest.known_hosts,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
    except OSError:
        return None
    try:
        await asyncio.wait_for(proc.wait(), 5)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return {0: True, 1: False}.get(proc.returncode)


def refusal(text: str, dest: Destination, listed: bool | None = None) -> BackendError:
    """ssh's complaint (its stderr) in corral's words. A changed key: ssh's warning says
    so, or ``listed`` (the pinned file has a line for the host, :func:`pinned_line`:
    also a line of another key type) when ssh's words are not all there; else not known."""
    host = dest.shown
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("@")]
    last = lines[-1] if lines else "ssh ended without a word"
    pinned = dest.known_hosts or "your known_hosts"
    changed = ("IDENTIFICATION HAS CHANGED" in text
               or "host key for" in text.lower() and "changed" in text)
    if changed or "Host key verification failed" in text and listed:
        return AuthError(f"The SSH host key of {host} is not the one pinned for it "
                         f"({pinned}): ssh could not verify it and corral refuses the "
                         "connection. If the server's key really changed, remove its old "
                         "line from that file and connect once with ssh to check the new "
                         "key.")
    if "Host key verification failed" in text:  # ssh warns of a changed key in any mode
        return AuthError(f"The SSH host key of {host} is not known ({pinned}): ssh could "
                         "not verify it and corral accepts no key it has not seen. Pin it "
                         "first (connect once with ssh, or ssh-keyscan into that file).")
    if "Permission denied" in text or "passphrase" in text.lower():
        return AuthError(f"{host} did not accept corral's SSH key ({last}); corral never "
                         "types a password or passphrase. Use a key the server accepts "
                         "(an agent, or keyfile= in the URI) that needs no passphrase.")
    return Unreachable(f"ssh could not reach {host}: {last}")


class Master:
    """One host's ControlMaster (see the module docstring)."""

    def __init__(self, dest: Destination) -> None:
        self.dest = dest
        self.holders: set[object] = set()
        self.proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._streams = 0
        self.name = f"{dest.key()}-{os.getpid()}-{next(_serial)}"
        """Its files' name: one master's stopping never touches the next one's."""

    @property
    def ctl(self) -> Path:
        return runtime_dir("ssh") / self.name

    @property
    def wrapper(self) -> Path:
        return self.ctl.with_name(self.ctl.name + ".sh")

    def running(self) -> bool:
        return (self.proc is not None and self.proc.returncode is None
                and self.ctl.exists())

    async def ensure(self, timeout: float) -> None:
        """Start the master unless it runs; it runs (authenticated) when this returns.

        Raises:
            AuthError: a host key or the key refused (in words).
            Unreachable: ssh cannot reach the host, or is not installed.
            NotResponding: it did not get through within ``timeout``.
        """
        async with self._lock:
            if self.running():
                return
            await self._end()
            await sweep(self.ctl.parent)
            ctl = self.ctl
            ctl.unlink(missing_ok=True)  # left by an earlier process with this pid
            log_path = ctl.with_name(ctl.name + ".log")
            deathsig = await _deathsig()
            with private_file(log_path, exclusive=False) as log:
                self.proc = await asyncio.create_subprocess_exec(
                    *deathsig, _ssh(), "-M", "-N", "-T", "-S", _literal(str(ctl)),
                    "-o", "ControlPersist=no", "-o", "ClearAllForwardings=yes",
                    "-o", "PermitLocalCommand=no", "-o", "ServerAliveInterval=5",
                    "-o", "ServerAliveCountMax=3", "-o", f"ConnectTimeout={max(1, int(timeout))}",
                    *self.dest.options(), "--", self.dest.host,
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=log, start_new_session=True)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while not ctl.exists():  # ssh binds it once the host let it in
                if self.proc.returncode is not None:
                    text = log_path.read_text(errors="replace")
                    self.proc = None
                    listed = None
                    if "Host key verification failed" in text:
                        listed = await pinned_line(self.dest)
                    raise refusal(text, self.dest, listed)
                if loop.time() > deadline:
                    await self._end()
                    raise NotResponding(f"ssh to {self.dest.shown} did not get through "
                                        f"within {timeout:g} s")
                await asyncio.sleep(0.05)

    def carry(self, uri: str) -> str:
        """``uri`` with libvirt's ``command=`` naming the wrapper that runs libvirt's ssh
        as a session of this master (written here, 0700, in the private directory)."""
        argv = [_ssh(), "-S", _literal(str(self.ctl)), "-o", "ControlMaster=no",
                *self.dest.host_key_options()]  # pinned, should it connect by itself
        script = (f"#!/bin/sh\n# corral: libvirt's ssh through corral's master for "
                  f"{self.dest.shown}\nexec {shlex.join(argv)} \"$@\"\n")
        path = self.wrapper
        if not path.exists() or path.read_text() != script:
            path.unlink(missing_ok=True)
            with private_file(path, binary=False) as f:
                f.write(script)
            os.chmod(path, 0o700)
        joiner = "&" if "?" in uri else "?"
        return f"{uri}{joiner}command={path}"

    async def _control(self, *args: str, timeout: float) -> None:
        proc = await asyncio.create_subprocess_exec(
            _ssh(), "-S", _literal(str(self.ctl)), *args, "--", self.dest.host,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
        try:
            _out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise NotResponding(f"ssh's master for {self.dest.shown} did not answer "
                                f"({args[1]})") from None
        if proc.returncode != 0:
            raise OperationFailed(f"ssh's master for {self.dest.shown} refused "
                                  f"{args[1]}: {err.decode(errors='replace').strip()}")

    async def stream(self, target: str, timeout: float, what: str) -> socket.socket:
        """A connected socket to ``target`` on the server (a unix socket path, or
        ``host:port`` as the server resolves it), carried by the master.

        Raises:
            Unreachable: the server could not connect to ``target`` (``what``, in words).
        """
        await self.ensure(timeout)
        self._streams += 1
        local = self.ctl.with_name(f"{self.name}.{self._streams}.sock")
        local.unlink(missing_ok=True)
        spec = f"{local}:{target}"
        loop = asyncio.get_running_loop()
        await self._control("-O", "forward", "-L", spec, timeout=timeout)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await asyncio.wait_for(loop.sock_connect(sock, str(local)), timeout)
        except BaseException:
            sock.close()
            raise
        finally:
            with contextlib.suppress(BackendError):
                await self._control("-O", "cancel", "-L", spec, timeout=timeout)
            local.unlink(missing_ok=True)
        try:  # the server speaks first (RFB's version); a failed connect there is EOF
            await asyncio.wait_for(_readable(sock), timeout)
            if not sock.recv(1, socket.MSG_PEEK):
                raise Unreachable(f"{self.dest.shown} could not connect to {what} "
                                  f"({target}) for corral: it is not there (any more), "
                                  "the SSH user may not open it, or the server's sshd "
                                  "forbids forwarding (AllowStreamLocalForwarding, "
                                  "AllowTcpForwarding)")
        except BaseException:
            sock.close()
            raise
        return sock

    async def _end(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()  # ssh removes its control socket as it ends
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()

    async def stop(self) -> None:
        """End the master (its sessions and streams end with it) and remove its files."""
        async with self._lock:
            await self._end()
            ctl = self.ctl
            for path in (ctl, self.wrapper, ctl.with_name(ctl.name + ".log")):
                path.unlink(missing_ok=True)


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def sweep(directory: Path) -> list[str]:
    """Remove what corral processes that are gone left in ``directory``: a master still
    running on its socket is told to exit, then its files go. Returns the names removed."""
    gone: list[str] = []
    for path in sorted(directory.iterdir()):
        key, _, rest = path.name.split(".", 1)[0].partition("-")
        pid = rest.split("-", 1)[0]
        if not pid.isdigit() or len(key) != 12 or int(pid) == os.getpid():
            continue
        if _alive(int(pid)):
            continue
        if path.is_socket() and "." not in path.name:  # a control socket
            with contextlib.suppress(OSError):
                proc = await asyncio.create_subprocess_exec(
                    _ssh(), "-S", _literal(str(path)), "-O", "exit", "--", "corral-stale",
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL)
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except asyncio.TimeoutError:
                    proc.kill()
                    await proc.wait()
        path.unlink(missing_ok=True)
        gone.append(path.name)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_masters: dict[Destination, Master] = {}
_serial = itertools.count(1)


def acquire(uri: str, holder: object) -> Master:
    """The master for ``uri``'s host (made, not started), held by ``holder`` until
    :func:`release`. Remotes on the same host with the same key share one."""
    dest = destination(uri)
    if dest is None:
        raise ValueError(f"not an SSH URI: {uri}")
    master = _masters.get(dest)
    if master is None:
        master = _masters[dest] = Master(dest)
    master.holders.add(holder)
    return master


async def release(holder: object) -> None:
    """``holder`` lets go; a master nobody holds any more is ended."""
    for dest, master in list(_masters.items()):
        master.holders.discard(holder)
        if not master.holders:
            del _masters[dest]
            await master.stop()
