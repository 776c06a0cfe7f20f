"""The plumbing of a libvirt remote: one ``virConnect``, its thread pool, libvirt's event
loop, the connection's close and domain lifecycle callbacks, and libvirt errors in words.

- Every libvirt call blocks, so each runs in this remote's own thread
  (:meth:`Connection.call`, one at a time: see ``__init__``), bounded by the remote's time-out: a daemon that does not answer
  is :class:`~backends.errors.NotResponding`, never a frozen UI.
- libvirt delivers events (domain lifecycle, keepalive, the connection closing, console
  streams) only while an event loop runs: :func:`ensure_event_loop` registers libvirt's
  default implementation once per process and runs ``virEventRunDefaultImpl`` in a daemon
  thread. Its callbacks hand what they get to the asyncio loop with
  ``call_soon_threadsafe``; nothing polls.
- Keepalive (every 3 s, 3 missed) closes a connection whose daemon stopped answering; the
  close callback then tells every listener, with the reason (``keepalive``: not
  responding; ``eof``/``error``: gone).
- libvirt prints its errors on stderr unless told not to, which would draw over the
  terminal: the module installs an error handler that keeps them quiet (they are raised as
  exceptions all the same).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

import libvirt

from .. import threads
from ..errors import (
    AuthError,
    BackendError,
    Conflict,
    NotFound,
    NotResponding,
    InvalidInput,
    OperationFailed,
    Unreachable,
    Unsupported,
)
from ..models import BackendEvent, EventKind, InstanceRef, InstanceStatus, Remote
from . import ssh_tunnel
from . import uri as uris
from .convert import lifecycle_action, status_of

log = logging.getLogger(__name__)

KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 3, 3

_loop_lock = threading.Lock()
_loop_started = False


def _quiet(_ctx: object, _err: object) -> None:
    """libvirt's error handler: errors are raised as exceptions, not printed."""


libvirt.registerErrorHandler(_quiet, None)


def ensure_event_loop() -> None:
    """Register libvirt's default event loop and run it in a daemon thread (once per
    process; before the first connection, which needs it for keepalive and events)."""
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()
        threads.run(_run_events, name="libvirt-events", failed=_events_not_started)
        _loop_started = True


def _events_not_started(error: BaseException) -> None:
    global _loop_started
    with _loop_lock:
        _loop_started = False  # the next connection tries again


def _run_events() -> None:
    while True:
        if libvirt.virEventRunDefaultImpl() < 0:  # pragma: no cover - libvirt's own failure
            log.warning("libvirt event loop iteration failed")


GIVEN_UP = "\0given up"
"""Marks an open the caller stopped waiting for (see ``open``)."""

CLOSED = object()
"""Put on a listener's queue when the connection closed (then the reason follows)."""

CLOSE_REASONS = {
    libvirt.VIR_CONNECT_CLOSE_REASON_ERROR: "error",
    libvirt.VIR_CONNECT_CLOSE_REASON_EOF: "eof",
    libvirt.VIR_CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive",
    libvirt.VIR_CONNECT_CLOSE_REASON_CLIENT: "client",
}

UNSUPPORTED = (libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_CONFIG_UNSUPPORTED,
               libvirt.VIR_ERR_OPERATION_UNSUPPORTED, libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED)
"""libvirt's "this driver, domain or configuration cannot do it": ``Unsupported``."""

CREDENTIALS = [libvirt.VIR_CRED_AUTHNAME, libvirt.VIR_CRED_ECHOPROMPT,
               libvirt.VIR_CRED_NOECHOPROMPT, libvirt.VIR_CRED_PASSPHRASE,
               libvirt.VIR_CRED_REALM, libvirt.VIR_CRED_CNONCE, libvirt.VIR_CRED_EXTERNAL]


class Connection:
    """One remote's connection to a libvirt daemon (see the module docstring)."""

    def __init__(self, remote: Remote, timeout: float) -> None:
        self.remote = remote
        self.uri = uris.effective(remote.address)
        self.timeout = timeout
        # One thread: libvirt 9.0's client crashes the process when keepalive closes a
        # connection while several threads have calls in flight on it (seen here, with a
        # daemon stopped by SIGSTOP). Calls to one daemon are one at a time anyway.
        self.pool = threads.Pool(max_workers=1, thread_name_prefix=f"libvirt-{remote.name}")
        self.conn: libvirt.virConnect | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listeners: set[asyncio.Queue] = set()
        self.close_reason = ""
        self._opening: asyncio.Lock | None = None
        self._callbacks: list[int] = []
        self._dead: list[libvirt.virConnect] = []
        self.tunnel: ssh_tunnel.Master | None = None
        """The host's SSH master (``ssh_tunnel.py``) once a screen or the transport needs it."""

    # -- calls -------------------------------------------------------------------------
    async def call(self, fn: Callable[..., Any], *args: Any, what: str = "",
                   within: float | None = None) -> Any:
        """``fn(*args)`` in the pool; libvirt errors become BackendErrors in words."""
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self.pool, fn, *args)
        except RuntimeError:  # the pool is shut down: this remote was closed
            raise Unreachable(f"the connection to '{self.remote.name}' is closed") from None
        try:
            return await asyncio.wait_for(future, within or self.timeout)
        except asyncio.TimeoutError:
            raise NotResponding(f"'{self.remote.name}' is not responding "
                                f"({what or 'libvirt call'} took over "
                                f"{within or self.timeout:g} s)") from None
        except libvirt.libvirtError as e:
            raise self.error(e, what) from None

    async def domain(self, ref: InstanceRef) -> libvirt.virDomain:
        conn = await self.live()
        try:
            return await self.call(conn.lookupByName, ref.name, what=f"finding {ref.name}")
        except NotFound:
            raise NotFound(f"{ref} does not exist (any more)") from None

    async def status(self, dom: libvirt.virDomain) -> InstanceStatus:
        state, _reason = await self.call(dom.state, what="reading the state")
        return status_of(state)

    async def live(self) -> libvirt.virConnect:
        """The open connection (opened again when it closed)."""
        conn = self.conn
        if conn is not None:
            return conn
        return await self.open()

    async def open(self) -> libvirt.virConnect:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self.conn is not None:
                return self.conn
            self.loop = asyncio.get_running_loop()
            await asyncio.to_thread(ensure_event_loop)
            dest = ssh_tunnel.destination(self.remote.address)
            if dest is not None:  # one SSH connection per host, the key pinned by corral
                master = self.master()
                await master.ensure(max(self.timeout, 15))
                self.uri = master.carry(uris.effective(self.remote.address))
            asked: list[str] = []
            try:
                conn = await self.call(self._open_blocking, asked, what="connecting",
                                       within=max(self.timeout, 15))
            except BackendError as e:
                if isinstance(e, NotResponding):
                    asked.append(GIVEN_UP)  # the open may still end: it then closes itself
                listed = None
                if dest is not None and "Host key verification failed" in e.message:
                    listed = await ssh_tunnel.pinned_line(dest)
                raise self._open_error(e, asked, listed) from None
            self.conn, self.close_reason = conn, ""
            return conn

    def _open_blocking(self, asked: list[str]) -> libvirt.virConnect:
        conn = libvirt.openAuth(self.uri, [CREDENTIALS, self._refuse, asked], 0)
        try:
            conn.setKeepAlive(KEEPALIVE_INTERVAL, KEEPALIVE_COUNT)
            conn.registerCloseCallback(self._closed, None)
            self._callbacks = [
                conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                            self._lifecycle, None),
                conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_REBOOT,
                                            self._rebooted, None),
                conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                            self._metadata, None),
            ]
        except libvirt.libvirtError:
            conn.close()
            raise
        if GIVEN_UP in asked:  # the caller timed out meanwhile: nobody will use it
            self._close_blocking(conn)
            raise libvirt.libvirtError("connection given up on")
        return conn

    @staticmethod
    def _refuse(credentials: list, asked: list[str]) -> int:
        """libvirt's credential callback: corral never answers (no prompt ever blocks)."""
        for cred in credentials:
            asked.append(str(cred[1] or ""))
        return -1

    async def close(self) -> None:
        """Close every connection this remote opened, once the calls in flight have ended:
        a ``virConnect`` freed under a call in another thread would crash the process."""
        conns = [c for c in (self.conn, *self._dead) if c is not None]
        self.conn, self._dead = None, []
        self.close_reason = "client"
        pool = self.pool
        pool.shutdown(wait=False, cancel_futures=True)

        finished = threading.Event()

        def finish() -> None:
            try:
                pool.shutdown(wait=True)
                for conn in conns:
                    try:
                        self._close_blocking(conn)
                    except libvirt.libvirtError:
                        pass
            finally:
                finished.set()

        threads.run(finish, name=f"libvirt-close-{self.remote.name}")
        await asyncio.to_thread(finished.wait, 5)  # a hung call: it closes in the background
        if self.tunnel is not None:
            self.tunnel = None
            await ssh_tunnel.release(self)

    def master(self) -> ssh_tunnel.Master:
        """This remote's hold on its host's SSH master (an SSH URI only; not started)."""
        if self.tunnel is None:
            self.tunnel = ssh_tunnel.acquire(self.remote.address, self)
        return self.tunnel

    def _close_blocking(self, conn: libvirt.virConnect) -> None:
        for callback in self._callbacks:
            try:
                conn.domainEventDeregisterAny(callback)
            except libvirt.libvirtError:
                pass
        try:
            conn.unregisterCloseCallback()
        except libvirt.libvirtError:
            pass
        conn.close()

    # -- callbacks (libvirt's event thread) ---------------------------------------------
    def _post(self, item: object) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._deliver, item)

    def _deliver(self, item: object) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(item)

    def _lifecycle(self, conn, dom, event: int, detail: int, _opaque) -> None:
        action = lifecycle_action(event, detail)
        if action and conn is self.conn:  # not a connection given up on (a late open)
            self._post(BackendEvent(EventKind.LIFECYCLE, self.remote.name, action=action,
                                    ref=InstanceRef(self.remote.name, dom.name())))

    def _rebooted(self, conn, dom, _opaque) -> None:
        if conn is not self.conn:
            return
        self._post(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                action="instance-restarted",
                                ref=InstanceRef(self.remote.name, dom.name())))

    def _metadata(self, conn, dom, _kind: int, _uri, _opaque) -> None:
        """The description (or other metadata) changed: read the domain again."""
        if conn is not self.conn:
            return
        self._post(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                action="instance-updated",
                                ref=InstanceRef(self.remote.name, dom.name())))

    def _closed(self, conn, reason: int, _opaque) -> None:
        why = CLOSE_REASONS.get(reason, "error")
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._lost, conn, why)

    def _lost(self, conn: libvirt.virConnect, why: str) -> None:
        if self.conn is conn:
            self.conn = None
            self._dead.append(conn)  # closed with the others (calls may still hold it)
        if why != "client":
            self.close_reason = why
        self._deliver(CLOSED)

    def subscribe(self) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self.listeners.add(queue)
        if self.conn is None:
            queue.put_nowait(CLOSED)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self.listeners.discard(queue)

    def lost_words(self) -> tuple[str, str]:
        """``(action, message)`` of the CONNECTION event for the last close."""
        name = self.remote.name
        if self.close_reason == "keepalive":
            return "not-responding", f"'{name}' is not responding (libvirt keepalive)"
        return "disconnected", f"lost the connection to the libvirt daemon of '{name}'"

    # -- errors ------------------------------------------------------------------------
    def error(self, e: libvirt.libvirtError, what: str = "") -> BackendError:
        code = e.get_error_code()
        text = (e.get_error_message() or str(e)).strip()
        name = self.remote.name
        if code in (libvirt.VIR_ERR_NO_DOMAIN,):
            return NotFound(f"no such domain on '{name}' ({text})")
        if code == libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT:
            return NotFound(f"no such snapshot on '{name}' ({text})")
        if code in UNSUPPORTED:
            return Unsupported(f"{what or 'that'} is not supported by '{name}': {text}")
        if code == libvirt.VIR_ERR_INVALID_ARG:
            return InvalidInput(f"{what or 'that'}: '{name}' refused the value: {text}")
        if code == libvirt.VIR_ERR_OPERATION_INVALID:
            return Conflict(f"{what or 'that'} is not possible now: {text}")
        if code == libvirt.VIR_ERR_OPERATION_TIMEOUT:
            return NotResponding(f"'{name}' did not answer in time: {text}")
        if code in (libvirt.VIR_ERR_AUTH_FAILED, libvirt.VIR_ERR_AUTH_CANCELLED,
                    libvirt.VIR_ERR_AUTH_UNAVAILABLE):
            return AuthError(f"'{name}' refused corral: {text}")
        if code in (libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_SYSTEM_ERROR,
                    libvirt.VIR_ERR_RPC, libvirt.VIR_ERR_INTERNAL_ERROR) and _lost(text):
            return Unreachable(f"'{name}': the libvirt daemon cannot be reached ({text})")
        return OperationFailed(f"{what + ' on ' if what else ''}'{name}' failed: {text}")

    def _open_error(self, e: BackendError, asked: list[str],
                    listed: bool | None = None) -> BackendError:
        """Why a connection could not be opened, in words (host keys, prompts); ``listed``:
        whether the pinned known_hosts file has a line for the host (``ssh_tunnel``)."""
        name, host = self.remote.name, uris.host_of(self.remote.address)
        text = e.message
        dest = ssh_tunnel.destination(self.remote.address)
        if dest is not None and "Host key verification failed" in text:  # the ssh program
            return ssh_tunnel.refusal(text, dest, listed)
        asked = [q for q in asked if q != GIVEN_UP]
        if any(q for q in asked) or "password" in text.lower() or "passphrase" in text.lower():
            return AuthError(f"{host} asks for a password or passphrase; corral never types "
                             "one. Use an SSH key the server accepts (an agent, or "
                             "keyfile= in the URI) that needs no passphrase.")
        if isinstance(e, NotResponding):
            return e
        if isinstance(e, AuthError):
            return e
        return Unreachable(f"Cannot connect to libvirt at {uris.redacted(self.remote.address)} "
                           f"('{name}'): {text}")


def _lost(text: str) -> bool:
    """Whether an error's words say the connection is gone. Not "no such file" alone: a
    domain's missing disk or ISO says that too ("Cannot access storage file …"); a missing
    daemon socket is caught by "socket"."""
    text = text.lower()
    return any(w in text for w in ("socket", "connection", "closed", "cannot recv",
                                   "cannot write", "end of file",
                                   "broken pipe", "not connected", "keepalive"))
