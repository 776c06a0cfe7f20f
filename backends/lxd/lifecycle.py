"""The full lifecycle of a hosted LXD/Incus instance: backups to a file and back, clone,
copy/move to another remote, rename, images (publish/list/delete), passwords, NICs and the
operations list. A mixin of :class:`~backends.lxd.backend.LXDBackend`; it uses the same
plumbing (``_call``, ``_wait``, ``_follow``, ``_update_instance``, ``_websocket``).

Wire facts this relies on (verified on LXD 5.0.2 and Incus 6.0 in the lab):

* Backups: ``POST /1.0/instances/<n>/backups`` is an operation; the file is
  ``GET …/backups/<b>/export`` (raw bytes); ``expires_at`` makes the daemon delete a backup
  corral could not delete itself. Import is ``POST /1.0/instances`` with the tarball as body;
  the new name goes in ``X-LXD-name`` (LXD) / ``X-Incus-name`` (Incus), API extension
  ``backup_override_name``, the pool in ``X-LXD-pool`` / ``X-Incus-pool``. Each server
  ignores the other's header (then the name inside the backup is used).
* Copy/move between remotes uses the migration API in **pull** mode: the source daemon
  offers the instance (``POST /1.0/instances/<n> {"migration": true}`` → secrets), the target
  daemon connects to the source's HTTPS address. corral itself moves no data, so it may talk
  to the source over its unix socket; the source must listen on the network
  (``core.https_address``) and the target must reach that address. The migration websockets
  are ``AllowUntrusted`` with the secret as credential, so the target needs no trust on the
  source; it verifies the source with the certificate corral hands over.
* Non-interactive exec (``interactive: false``) gives fds ``0``, ``1``, ``2`` and
  ``control``; an empty **text** frame on ``0`` is end-of-input (LXD's
  ``WebsocketRecvStream`` treats a text message as the stream barrier and closes the
  process's stdin).
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote
import ipaddress
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from pylxd import exceptions as pylxd_exc
from websockets.exceptions import ConnectionClosed

from ..errors import (
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    OperationFailed,
    Unreachable,
    Unsupported,
)
from ..models import Instance, InstanceRef, InstanceStatus, Operation
from . import convert
from . import create as createmod

if TYPE_CHECKING:  # pragma: no cover
    from .backend import LXDBackend

MiB = 1024 * 1024
_DONE = ("Success", "Failure", "Cancelled")


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """One image of a remote's image store (``GET /1.0/images?recursion=1``)."""

    fingerprint: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    size: int | None = None
    public: bool = False
    type: str = "container"
    """``container`` or ``virtual-machine``."""
    architecture: str = ""
    created_at: datetime | None = None
    uploaded_at: datetime | None = None


def to_image(data: dict[str, Any]) -> ImageInfo:
    props = data.get("properties") or {}
    size = data.get("size")
    return ImageInfo(
        fingerprint=str(data.get("fingerprint") or ""),
        aliases=tuple(a.get("name") for a in data.get("aliases") or () if a.get("name")),
        description=str(props.get("description") or ""),
        size=size if isinstance(size, int) and size >= 0 else None,
        public=bool(data.get("public")),
        type=str(data.get("type") or "container"),
        architecture=str(data.get("architecture") or ""),
        created_at=convert.parse_time(data.get("created_at")),
        uploaded_at=convert.parse_time(data.get("uploaded_at")),
    )


def mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB"


class _NoFrames(logging.LoggerAdapter):
    """A websockets logger that never logs frames at DEBUG (they would carry the secret)."""

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_QUIET = _NoFrames(logging.getLogger("corral.lxd.exec"), {})


def _op_id(body: dict[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return str(meta.get("id") or str(body.get("operation", "")).rstrip("/")
               .split("/")[-1].split("?")[0])


# Input checks (pure) ---------------------------------------------------------------------

_NIC_TYPES = ("bridged", "macvlan", "routed", "ipvlan", "physical", "p2p", "sriov")


def check_device_name(name: str) -> str:
    if not name or not name.strip():
        raise InvalidInput("A device name is needed (e.g. eth1).")
    if name != name.strip() or any(c in name for c in "/ \t\n") or len(name) > 64:
        raise InvalidInput(f"Device name '{name}': no slashes or spaces, at most 64 "
                           f"characters.")
    return name


def check_addresses(text: str, family: int, *, many: bool, label: str) -> str:
    """One address (or, with ``many``, a comma list) of ``family`` (4/6), as LXD wants it
    (no prefix length). Empty stays empty."""
    text = (text or "").strip()
    if not text:
        return ""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and not many:
        raise InvalidInput(f"{label}: one address only (a comma list is for routed NICs).")
    out = []
    for part in parts:
        try:
            addr = ipaddress.ip_address(part)
        except ValueError:
            raise InvalidInput(f"{label}: '{part}' is not an IPv{family} address"
                               + (" (give it without a /prefix)" if "/" in part else "")
                               + ".") from None
        if addr.version != family:
            raise InvalidInput(f"{label}: '{part}' is an IPv{addr.version} address, not "
                               f"IPv{family}.")
        out.append(str(addr))
    return ",".join(out)


def check_credentials_text(user: str, password: str) -> bytes:
    """``user:password\\n`` for chpasswd; the password never appears in a message."""
    if not user or any(c in user for c in ":\n\r\0") or user != user.strip():
        raise InvalidInput("The user name must be non-empty, without ':', spaces at the "
                           "ends or line breaks.")
    if not password:
        raise InvalidInput("The password must not be empty.")
    if any(c in password for c in ":\n\r\0"):
        raise InvalidInput("The password must not contain ':' or a line break "
                           "(chpasswd reads 'user:password' lines).")
    return f"{user}:{password}\n".encode()


class LifecycleMixin:
    """Backups, clone, copy/move, rename, images, passwords, NICs, operations."""

    # helpers --------------------------------------------------------------------------

    def _ref_of(self: "LXDBackend", name: str) -> InstanceRef:
        return InstanceRef(self.remote.name, name, self.remote.project)

    async def _names_now(self: "LXDBackend") -> set[str]:
        client = self.client
        urls = await self._call(lambda: client.api.instances.get().json()["metadata"] or [])
        names = {u.rstrip("/").split("/")[-1].split("?")[0] for u in urls}
        self._names = set(names)
        return names

    async def _check_free(self: "LXDBackend", name: str) -> None:
        problem = createmod.name_problem(name)
        if problem:
            raise InvalidInput(f"Instance name '{name}': {problem}")
        if name in await self._names_now():
            raise Conflict(f"'{name}' is already taken on '{self.remote.name}'.")

    async def _stream(self: "LXDBackend", fn: Callable[[threading.Event], Any]) -> Any:
        """Run a long blocking transfer in the pool (no time-out; cancelling the coroutine
        sets the event the transfer checks between chunks, and waits for it to stop)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        future = loop.run_in_executor(self._pool, fn, stop)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(future), 30)
            except BaseException:  # noqa: BLE001 - cancelled on purpose
                pass
            raise
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self._map_error(e) from e

    def _reporter(self, progress: Callable[[str], None] | None,
                  every: float = 0.2) -> Callable[[str, bool], None]:
        """A thread-safe, throttled progress function for pool threads."""
        loop = asyncio.get_running_loop()
        last = [0.0]

        def report(text: str, force: bool = False) -> None:
            if progress is None:
                return
            now = time.monotonic()
            if force or now - last[0] >= every:
                last[0] = now
                loop.call_soon_threadsafe(progress, text)

        return report

    # 1. export ------------------------------------------------------------------------

    async def export_instance(self: "LXDBackend", ref: InstanceRef, path: str, *,
                              with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Back ``ref`` up into the file ``path`` (a gzip tarball ``lxc import`` reads);
        returns the bytes written. The file appears only when complete (``path.part``
        until then); the server-side backup is deleted afterwards, also on failure.

        Raises:
            InvalidInput: ``path`` exists, or its folder does not.
            NotFound: no such instance.
            OperationFailed: the daemon could not make or send the backup.
        """
        report = progress or (lambda text: None)
        path = os.path.abspath(os.path.expanduser(path))
        if os.path.exists(path):
            raise InvalidInput(f"{path} already exists: choose another file name (corral "
                               f"does not overwrite files).")
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise InvalidInput(f"There is no folder {folder}.")
        if not os.access(folder, os.W_OK):
            raise InvalidInput(f"Cannot write in {folder}.")
        await self.get_instance(ref)  # NotFound in words before anything is made
        client = self.client
        exts = self.info.api_extensions if self.info else frozenset()
        backup = f"corral-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        expires = datetime.now(timezone.utc) + timedelta(days=1)
        body: dict[str, Any] = {
            "name": backup, "instance_only": not with_snapshots,
            "container_only": not with_snapshots, "optimized_storage": False,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if "backup_compression_algorithm" in exts:
            body["compression_algorithm"] = "gzip"
        node = client.api.instances[ref.name].backups
        report(f"creating a backup of {ref.name}")
        op_id = await self._call(lambda: _op_id(node.post(json=body).json()))
        part = path + ".part"
        made_part: list[str] = []
        try:
            meta = await self._follow(op_id, report, timeout=3600)
            if meta.get("status") != "Success":
                raise OperationFailed(f"{self.product} could not back up {ref}: "
                                      f"{meta.get('err') or meta.get('status')}.")
            tick = self._reporter(progress)

            def _download(stop: threading.Event) -> int:
                try:
                    out_file = open(part, "xb")  # noqa: SIM115 - closed by the with below
                except FileExistsError:
                    raise InvalidInput(f"{part} exists (another export to the same file?); "
                                       f"remove it or choose another name.") from None
                except OSError as e:
                    raise OperationFailed(f"Cannot write {part}: {e.strerror or e}") from None
                made_part.append(part)
                r = node[backup].export.get(stream=True, timeout=(self.timeout, 300))
                written = 0
                try:
                    with out_file as out:
                        for chunk in r.iter_content(1 << 20):
                            if stop.is_set():
                                raise asyncio.CancelledError()
                            out.write(chunk)
                            written += len(chunk)
                            tick(f"downloading {mib(written)}")
                        out.flush()
                        os.fsync(out.fileno())
                finally:
                    r.close()
                if os.path.exists(path):
                    raise InvalidInput(f"{path} appeared while downloading; the backup "
                                       f"was not saved.")
                os.rename(part, path)
                tick(f"downloaded {mib(written)}", True)
                return written

            written = await self._stream(_download)
            report(f"saved {mib(written)} to {path}")
            return written
        except BaseException:
            try:
                if made_part and os.path.exists(part):  # only a .part this export made
                    os.unlink(part)
            except OSError:
                pass
            raise
        finally:
            cleanup = asyncio.ensure_future(self._delete_backup(ref, backup, op_id))
            try:
                await asyncio.shield(cleanup)
            except Exception:  # noqa: BLE001 - it expires on the server within a day
                pass

    async def _delete_backup(self: "LXDBackend", ref: InstanceRef, backup: str,
                             op_id: str) -> None:
        client = self.client

        def _do() -> None:
            # a backup still being made cannot be deleted: let its operation end first
            try:
                client.api.operations[op_id].wait.get(params={"timeout": 120}, timeout=130)
            except pylxd_exc.LXDAPIException:
                pass
            try:
                self._wait(client.api.instances[ref.name].backups[backup].delete(), 120)
            except pylxd_exc.NotFound:
                pass

        await self._call(_do, timeout=300)

    # 2. import ------------------------------------------------------------------------

    async def import_instance(self: "LXDBackend", path: str, name: str, *,
                              storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create instance ``name`` from a backup file (``export_instance``/``lxc export``),
        snapshots included when the backup has them.

        Raises:
            InvalidInput: no such file, a bad name, an unknown pool (nothing sent).
            Conflict: ``name`` is taken (checked before uploading).
            OperationFailed: the daemon refused the file (nothing is left behind).
        """
        report = progress or (lambda text: None)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"There is no file {path}.")
        if not os.access(path, os.R_OK):
            raise InvalidInput(f"Cannot read {path}.")
        await self._check_free(name)
        client = self.client
        if storage_pool:
            pools = await self._call(
                lambda: client.api.storage_pools.get().json()["metadata"] or [])
            if storage_pool not in {u.rstrip("/").split("/")[-1] for u in pools}:
                raise InvalidInput(f"There is no storage pool '{storage_pool}' on "
                                   f"'{self.remote.name}'.")
        prefix = "X-Incus" if self.info is not None and self.info.server == "incus" \
            else "X-LXD"
        headers = {"Content-Type": "application/octet-stream", f"{prefix}-name": name}
        if storage_pool:
            headers[f"{prefix}-pool"] = storage_pool
        total = os.path.getsize(path)
        tick = self._reporter(progress)

        class _Body:
            """The file as a request body: sized (no chunked encoding), with progress."""

            def __init__(self, f: Any, stop: threading.Event) -> None:
                self.f, self.stop, self.sent = f, stop, 0

            def __len__(self) -> int:
                return total

            def __iter__(self) -> Any:
                while chunk := self.read(1 << 20):
                    yield chunk

            def read(self, n: int = -1) -> bytes:
                if self.stop.is_set():
                    raise asyncio.CancelledError()
                chunk = self.f.read(n if n and n > 0 else 1 << 20)
                self.sent += len(chunk)
                tick(f"uploading {mib(self.sent)} of {mib(total)}")
                return chunk

        def _upload(stop: threading.Event) -> str:
            with open(path, "rb") as f:
                r = client.api.instances.post(data=_Body(f, stop), headers=headers,
                                              timeout=(self.timeout, 900))
            tick(f"uploaded {mib(total)}", True)
            return _op_id(r.json())

        report(f"uploading {os.path.basename(path)} ({mib(total)})")
        try:
            op_id = await self._stream(_upload)
        except OperationFailed as e:
            raise OperationFailed(f"{self.product} refused {os.path.basename(path)}: "
                                  f"{e.message}") from e
        try:
            meta = await self._follow(op_id, report, timeout=3600)
        except asyncio.CancelledError:
            # the import may still be running: cancel or outwait it, then delete
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            done.set_result(op_id)
            await asyncio.shield(self._undo_create(name, done))
            raise
        if meta.get("status") != "Success":
            await self._remove_if_made(name)
            raise OperationFailed(f"Importing {os.path.basename(path)} as '{name}' failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        try:
            inst = await self.get_instance(self._ref_of(name))
        except NotFound:
            raise OperationFailed(f"{self.product} reported the import done, but there is "
                                  f"no '{name}' (the file may name another instance and "
                                  f"this server ignored the new name).") from None
        self._names.add(name)
        report("done")
        return inst

    # 3. clone -------------------------------------------------------------------------

    async def clone_instance(self: "LXDBackend", ref: InstanceRef, new_name: str, *,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """A copy of ``ref`` on the same remote (``POST /1.0/instances``, source ``copy``).

        Raises:
            InvalidInput / Conflict: bad or taken name (nothing made).
            OperationFailed: the copy failed (nothing left behind).
        """
        report = progress or (lambda text: None)
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        await self._check_free(new_name)
        # what `lxc copy` sends: the server takes no profiles/devices from the source
        body = {"name": new_name, **_copied_fields(data),
                "source": {"type": "copy", "source": ref.name,
                           "instance_only": not with_snapshots,
                           "container_only": not with_snapshots}}
        report(f"copying {ref.name} to {new_name}")
        op_id = await self._call(lambda: _op_id(client.api.instances.post(json=body).json()))
        try:
            meta = await self._follow(op_id, report, timeout=3600)
        except (asyncio.CancelledError, BackendError):
            await asyncio.shield(self._undo_create(new_name, _done(op_id)))
            raise
        if meta.get("status") != "Success":
            await self._remove_if_made(new_name)
            raise OperationFailed(f"Copying {ref} to '{new_name}' failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        self._names.add(new_name)
        report("done")
        return await self.get_instance(self._ref_of(new_name))

    # 4. copy / move to another remote -------------------------------------------------

    async def _listening(self: "LXDBackend") -> tuple[list[str], str]:
        """This server's network addresses (``host:port``) and certificate (PEM)."""
        client = self.client
        meta = await self._call(lambda: client.api.get().json()["metadata"])
        env = meta.get("environment") or {}
        addresses = [str(a) for a in env.get("addresses") or () if a]
        if not self.remote.is_unix:
            mine = self.remote.address.split("://", 1)[1].rstrip("/")
            addresses = [mine] + [a for a in addresses if a != mine]
        return addresses, str(env.get("certificate") or "")

    async def copy_to(self: "LXDBackend", ref: InstanceRef, target: "LXDBackend",
                      new_name: str, *, move: bool = False, with_snapshots: bool = True,
                      progress: Callable[[str], None] | None = None) -> Instance:
        """Cold copy (or move) of the stopped instance ``ref`` to the remote ``target``,
        by the migration API in pull mode (the target daemon pulls from this one).

        Nothing happens to ``ref`` unless the copy exists on the target; a move deletes
        the source only then.

        Raises:
            Unreachable: the target cannot be reached (nothing done).
            Conflict: ``ref`` is running or frozen, or ``new_name`` is taken on the target.
            InvalidInput: a bad name; the target lacks a profile the instance uses.
            Unsupported: this server does not listen on the network, so it cannot be
                pulled from.
            OperationFailed: the transfer failed (nothing left on the target).
        """
        report = progress or (lambda text: None)
        verb = "move" if move else "copy"
        if target is self or (target.remote.name == self.remote.name):
            raise InvalidInput(f"That is the same remote: use clone (or rename) instead of "
                               f"a {verb}.")
        try:
            target.client
        except Unreachable:
            raise Unreachable(f"Cannot {verb} to '{target.remote.name}': it is not "
                              f"connected. Nothing was changed.") from None
        try:
            await target._call(lambda: target.client.api.get().json())
        except BackendError as e:
            raise type(e)(f"Cannot {verb} to '{target.remote.name}': {e.message} Nothing "
                          f"was changed.") from e
        await target._check_free(new_name)
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        status = convert.status_of(data.get("status"))
        if status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{ref} is {status.value}: stop it first, or let corral stop it "
                           f"(a {verb} to another remote takes a stopped instance).")
        profiles = list(data.get("profiles") or [])
        there = await target._call(
            lambda: target.client.api.profiles.get().json()["metadata"] or [])
        there_names = {u.rstrip("/").split("/")[-1].split("?")[0] for u in there}
        missing = [p for p in profiles if p not in there_names]
        if missing:
            raise InvalidInput(f"'{target.remote.name}' has no profile "
                               f"{', '.join(repr(p) for p in missing)}, which {ref} uses. "
                               f"Create it there first.")
        addresses, cert = await self._listening()
        if not addresses or not cert:
            raise Unsupported(
                f"'{self.remote.name}' does not listen on the network (core.https_address "
                f"is unset), so '{target.remote.name}' cannot pull {ref.name} from it. "
                f"Set core.https_address on '{self.remote.name}'.")
        only = not with_snapshots

        report(f"preparing the {verb} of {ref.name}")

        def _offer() -> tuple[str, dict[str, str]]:
            r = client.api.instances[ref.name].post(json={
                "migration": True, "live": False, "instance_only": only,
                "container_only": only})
            body = r.json()
            secrets = (body.get("metadata") or {}).get("metadata") or {}
            return _op_id(body), {k: v for k, v in secrets.items() if isinstance(v, str)}

        src_op, secrets = await self._call(_offer)
        tgt_op = ""
        try:
            body = {
                "name": new_name,
                **_copied_fields(data),
                "source": {
                    "type": "migration", "mode": "pull",
                    "operation": f"https://{addresses[0]}/1.0/operations/{src_op}",
                    "certificate": cert, "secrets": secrets,
                    "instance_only": only, "container_only": only, "live": False,
                },
            }
            if self.remote.project != "default":
                body["source"]["operation"] += f"?project={self.remote.project}"

            tgt_op = await target._call(
                lambda: _op_id(target.client.api.instances.post(json=body).json()))
            report(f"{'moving' if move else 'copying'} {ref.name} to "
                   f"{target.remote.name}:{new_name}")
            meta = await target._follow(tgt_op, report, timeout=3600)
            if meta.get("status") != "Success":
                err = str(meta.get("err") or meta.get("status"))
                hint = ""
                if "Unknown configuration key" in err and with_snapshots:
                    hint = (f" '{target.remote.name}' ({target.product} "
                            f"{target.info.version if target.info else ''}) does not know a "
                            f"setting the snapshots carry; a {verb} without snapshots may "
                            f"work.").replace(" )", ")")
                raise OperationFailed(
                    f"The {verb} of {ref} to '{target.remote.name}' failed: "
                    f"{err.rstrip('.')}.{hint}")
            inst = await target.get_instance(target._ref_of(new_name))
        except BaseException as e:
            cleanup = asyncio.ensure_future(
                self._undo_migration(target, new_name, src_op, tgt_op))
            try:
                await asyncio.shield(cleanup)
            except Exception:  # noqa: BLE001 - the first error is the one to show
                pass
            if isinstance(e, BackendError) and not isinstance(e, OperationFailed) \
                    and not isinstance(e, Conflict):
                raise OperationFailed(f"The {verb} of {ref} to '{target.remote.name}' "
                                      f"failed: {e.message}") from e
            raise
        target._names.add(new_name)
        await self._call(self._wait_quietly, src_op, 60, timeout=90)
        if move:
            report(f"deleting {ref.name} from {self.remote.name}")
            try:
                await self.delete(ref)
            except BackendError as e:
                raise OperationFailed(
                    f"{ref} was copied to {target.remote.name}:{new_name}, but could not be "
                    f"deleted here: {e.message}", title="Copied, not moved") from e
        report("done")
        return inst

    def _wait_quietly(self: "LXDBackend", op_id: str, timeout: float) -> None:
        try:
            self.client.api.operations[op_id].wait.get(params={"timeout": int(timeout)},
                                                       timeout=timeout + self.timeout)
        except pylxd_exc.LXDAPIException:
            pass

    async def _undo_migration(self: "LXDBackend", target: "LXDBackend", name: str,
                              src_op: str, tgt_op: str) -> None:
        """After a failed/cancelled transfer: end both operations, remove what the target
        made."""
        for backend, op in ((target, tgt_op), (self, src_op)):
            if not op:
                continue

            def _cancel(backend: Any = backend, op: str = op) -> None:
                node = backend.client.api.operations[op]
                try:
                    meta = node.get().json()["metadata"]
                    if meta.get("status") not in _DONE and meta.get("may_cancel"):
                        node.delete()
                except pylxd_exc.LXDAPIException:
                    pass

            try:
                await backend._call(_cancel)
            except BackendError:
                pass
        if tgt_op:
            try:
                await target._call(target._wait_quietly, tgt_op, 60, timeout=90)
            except BackendError:
                pass
        await target._remove_if_made(name)

    # 5. rename / description ----------------------------------------------------------

    async def rename_instance(self: "LXDBackend", ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped instance (its snapshots go along).

        Raises:
            Conflict: it is running, or the name is taken.
            InvalidInput: a bad name.
        """
        inst = await self.get_instance(ref)
        if inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{ref} is {inst.status.value}: stop it first to rename it.")
        if new_name == ref.name:
            return inst
        await self._check_free(new_name)
        client = self.client
        await self._call(lambda: self._wait(
            client.api.instances[ref.name].post(json={"name": new_name}), 120), timeout=150)
        self._names.discard(ref.name)
        self._names.add(new_name)
        for table in (self._previous, self._pending, self._status):
            table.pop(ref, None)
        return await self.get_instance(self._ref_of(new_name))

    async def set_description(self: "LXDBackend", ref: InstanceRef, text: str) -> None:
        text = text.strip()
        if len(text) > 1024:
            raise InvalidInput("A description: at most 1024 characters.")

        def change(data: dict[str, Any]) -> None:
            data["description"] = text

        await self._update_instance(ref, change)

    # 6. images ------------------------------------------------------------------------

    async def list_images(self: "LXDBackend") -> list[ImageInfo]:
        client = self.client
        items = await self._call(
            lambda: client.api.images.get(params={"recursion": 1}).json()["metadata"] or [])
        images = [to_image(d) for d in items]
        images.sort(key=lambda i: (i.aliases == (), [a.lower() for a in i.aliases],
                                   i.fingerprint))
        return images

    async def publish_image(self: "LXDBackend", ref: InstanceRef, *,
                            snapshot: str | None = None, alias: str = "",
                            public: bool = False, description: str = "",
                            progress: Callable[[str], None] | None = None) -> str:
        """Make an image of a stopped instance, or of one of its snapshots; returns its
        fingerprint.

        Raises:
            Conflict: the instance runs (and no snapshot was named), or the alias is taken.
            NotFound: no such snapshot.
            OperationFailed: the daemon failed (nothing is left).
        """
        report = progress or (lambda text: None)
        alias = alias.strip()
        if alias and (any(c in alias for c in "/ \t\n:") or len(alias) > 255):
            raise InvalidInput(f"Image alias '{alias}': no slashes, colons or spaces.")
        inst = await self.get_instance(ref)
        client = self.client
        if snapshot:
            try:
                await self._call(lambda: client.api.instances[ref.name]
                                 .snapshots[quote(snapshot, safe="")].get().json())
            except NotFound:
                raise NotFound(f"{ref} has no snapshot '{snapshot}'.") from None
            source = {"type": "snapshot", "name": f"{ref.name}/{snapshot}"}
        else:
            if inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
                raise Conflict(f"{ref} is {inst.status.value}: stop it first, or publish one "
                               f"of its snapshots (an image of a running instance would not "
                               f"be consistent).")
            source = {"type": "instance", "name": ref.name}
        if alias:
            try:
                await self._call(lambda: client.api.images.aliases[quote(alias, safe="")]
                                 .get().json())
            except NotFound:
                pass
            else:
                raise Conflict(f"The image alias '{alias}' is already taken on "
                               f"'{self.remote.name}'.")
        body: dict[str, Any] = {"source": source, "public": bool(public)}
        if description:
            body["properties"] = {"description": description}
        if alias:
            body["aliases"] = [{"name": alias, "description": ""}]
        what = f"{ref.name}/{snapshot}" if snapshot else ref.name
        report(f"publishing {what}")
        op_id = await self._call(lambda: _op_id(client.api.images.post(json=body).json()))
        meta = await self._follow(op_id, report, timeout=3600)
        if meta.get("status") != "Success":
            raise OperationFailed(f"Publishing {what} failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        fingerprint = str((meta.get("metadata") or {}).get("fingerprint") or "")
        if not fingerprint:
            raise OperationFailed(f"{self.product} published {what} but named no image.")
        if alias:
            def _ensure_alias() -> None:
                try:
                    client.api.images.aliases[quote(alias, safe="")].get()
                except pylxd_exc.NotFound:
                    client.api.images.aliases.post(json={"name": alias,
                                                         "target": fingerprint})

            await self._call(_ensure_alias)
        report("done")
        return fingerprint

    async def delete_image(self: "LXDBackend", fingerprint: str) -> None:
        fingerprint = fingerprint.strip()
        if not fingerprint:
            raise InvalidInput("Which image? (no fingerprint given)")
        client = self.client

        def _do() -> None:
            try:
                self._wait(client.api.images[fingerprint].delete(), 120)
            except pylxd_exc.NotFound:
                raise NotFound(f"There is no image {fingerprint[:12]} on "
                               f"'{self.remote.name}'.") from None

        await self._call(_do, timeout=150)

    # 7. passwords ---------------------------------------------------------------------

    async def set_password(self: "LXDBackend", ref: InstanceRef, user: str,
                           password: str) -> None:
        """Set ``user``'s password inside the running instance with ``chpasswd``, the
        ``user:password`` line on its stdin (never in a command line, log or message).

        Raises:
            InvalidInput: ':' or a line break in user or password, an empty password.
            Conflict: the instance is not running.
            Unsupported: the image has no chpasswd.
            OperationFailed: chpasswd failed (its own words, e.g. an unknown user).
        """
        line = check_credentials_text(user, password)
        await self._require_running(ref, "password")
        code, _out, err = await self._exec_with_input(ref, ["chpasswd"], line)
        secret = password.encode()
        text = err.replace(secret, b"***").decode(errors="replace").strip()
        if code == 127 or (code is None and "not found" in text.lower()):
            raise Unsupported(f"{ref} has no chpasswd, so corral cannot set passwords in it "
                              f"(install the 'passwd' or shadow tools in the image).")
        if code != 0:
            raise OperationFailed(f"chpasswd in {ref} failed (exit {code}) for user "
                                  f"'{user}': {text or 'no message'}.")

    async def _exec_with_input(self: "LXDBackend", ref: InstanceRef, argv: list[str],
                               data: bytes, *, timeout: float = 60
                               ) -> tuple[int | None, bytes, bytes]:
        """Run ``argv`` non-interactively with ``data`` on stdin, then end-of-input;
        return (exit code, stdout, stderr). Frames are never logged."""
        body = {"command": argv, "wait-for-websocket": True, "interactive": False,
                "environment": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                        "/sbin:/bin", "HOME": "/root", "LANG": "C"},
                "record-output": False}
        op_id, fds = await self._websocket_operation(ref, "exec", body)
        if "1" not in fds or "2" not in fds:
            raise OperationFailed(f"'{self.remote.name}' gave no output websockets.")
        opened: list[Any] = []
        out: dict[str, bytearray] = {"1": bytearray(), "2": bytearray()}

        async def reader(ws: Any, key: str) -> None:
            try:
                async for frame in ws:
                    if isinstance(frame, str):
                        if not frame:
                            break
                        frame = frame.encode()
                    out[key] += frame
            except ConnectionClosed:
                pass

        try:
            async with asyncio.timeout(timeout):
                for key in ("control", "1", "2", "0"):
                    ws = await self._operation_socket(op_id, fds[key], logger=_QUIET)()
                    opened.append(ws)
                control, stdout, stderr, stdin = opened
                readers = [asyncio.ensure_future(reader(stdout, "1")),
                           asyncio.ensure_future(reader(stderr, "2"))]
                try:
                    await stdin.send(data)
                    await stdin.send("")  # end of input: LXD closes the process's stdin
                    await asyncio.gather(*readers)
                finally:
                    for r in readers:
                        r.cancel()
        except TimeoutError:
            raise OperationFailed(f"{argv[0]} in {ref} did not finish within "
                                  f"{int(timeout)} s.") from None
        except (OSError, ConnectionClosed) as e:
            raise OperationFailed(f"The connection to '{self.remote.name}' was lost while "
                                  f"running {argv[0]} in {ref} ({type(e).__name__}).") from None
        finally:
            for ws in reversed(opened):
                try:
                    await ws.close()
                except Exception:  # noqa: BLE001
                    pass
        client = self.client

        def _wait() -> dict[str, Any]:
            return client.api.operations[op_id].wait.get(
                params={"timeout": 30}, timeout=30 + self.timeout).json()["metadata"]

        try:
            meta = await self._call(_wait, timeout=60)
        except OperationFailed as e:
            return None, bytes(out["1"]), (str(e) or "").encode()
        code = (meta.get("metadata") or {}).get("return")
        if code is None:
            return None, bytes(out["1"]), bytes(out["2"]) + str(meta.get("err") or "").encode()
        return int(code), bytes(out["1"]), bytes(out["2"])

    # 8. NICs --------------------------------------------------------------------------

    async def list_nics(self: "LXDBackend", ref: InstanceRef) -> dict[str, dict[str, str]]:
        """The instance's NICs as in effect (profiles included): name -> device."""
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        devices = data.get("expanded_devices") or data.get("devices") or {}
        return {n: dict(d) for n, d in sorted(devices.items()) if d.get("type") == "nic"}

    async def _network_subnets(self: "LXDBackend", network: str) -> dict[int, Any]:
        client = self.client
        try:
            net = await self._call(
                lambda: client.api.networks[network].get().json()["metadata"])
        except NotFound:
            raise InvalidInput(f"There is no network '{network}' on "
                               f"'{self.remote.name}'.") from None
        if not net.get("managed"):
            raise InvalidInput(f"'{network}' is not a network {self.product} manages; "
                               f"attach to it as a bridged NIC with parent={network}.")
        out: dict[int, Any] = {}
        cfg = net.get("config") or {}
        for family, key in ((4, "ipv4.address"), (6, "ipv6.address")):
            value = str(cfg.get(key) or "")
            if value and value not in ("none", "auto"):
                try:
                    out[family] = ipaddress.ip_interface(value).network
                except ValueError:
                    pass
        return out

    def _check_in(self, network: str, subnets: dict[int, Any], family: int,
                  addresses: str) -> None:
        for a in filter(None, addresses.split(",")):
            subnet = subnets.get(family)
            if subnet is None:
                raise InvalidInput(f"Network '{network}' has no IPv{family} subnet, so a "
                                   f"static IPv{family} address cannot be given.")
            if ipaddress.ip_address(a) not in subnet:
                raise InvalidInput(f"{a} is not in {network}'s subnet {subnet}.")

    async def add_nic(self: "LXDBackend", ref: InstanceRef, name: str, *, network: str = "",
                      nictype: str = "", parent: str = "", ipv4: str = "",
                      ipv6: str = "") -> None:
        """Add a NIC: on a managed ``network``, or of ``nictype`` (bridged, macvlan,
        routed, ...) on the host interface ``parent``; optional static addresses (routed
        takes comma lists).

        Raises:
            InvalidInput: bad names/addresses, unknown network (nothing sent).
            Conflict: the instance already has a device of that name.
        """
        check_device_name(name)
        routed = nictype == "routed"
        v4 = check_addresses(ipv4, 4, many=routed, label="IPv4 address")
        v6 = check_addresses(ipv6, 6, many=routed, label="IPv6 address")
        dev: dict[str, str] = {"type": "nic", "name": name}
        if network:
            if nictype or parent:
                raise InvalidInput("Give either a managed network, or a NIC type with a "
                                   "parent interface, not both.")
            subnets = await self._network_subnets(network)
            self._check_in(network, subnets, 4, v4)
            self._check_in(network, subnets, 6, v6)
            dev["network"] = network
        else:
            if not nictype:
                raise InvalidInput("Give a managed network, or a NIC type (bridged, macvlan, "
                                   "routed) and a parent interface.")
            if nictype not in _NIC_TYPES:
                raise InvalidInput(f"Unknown NIC type '{nictype}' (known: "
                                   f"{', '.join(_NIC_TYPES)}).")
            if not parent and nictype in ("bridged", "macvlan", "physical", "ipvlan", "sriov"):
                raise InvalidInput(f"A {nictype} NIC needs a parent interface on the host.")
            if nictype in ("macvlan", "physical", "sriov", "p2p") and (v4 or v6):
                raise InvalidInput(f"A {nictype} NIC cannot have a static address set by "
                                   f"{self.product}; configure it inside the instance.")
            dev["nictype"] = nictype
            if parent:
                dev["parent"] = parent
        if v4:
            dev["ipv4.address"] = v4
        if v6:
            dev["ipv6.address"] = v6

        def change(data: dict[str, Any]) -> None:
            expanded = data.get("expanded_devices") or {}
            if name in data["devices"] or name in expanded:
                raise Conflict(f"{ref} already has a device named '{name}'.")
            data["devices"][name] = dev

        try:
            await self._update_instance(ref, change)
        except OperationFailed as e:
            raise OperationFailed(f"{self.product} refused the NIC '{name}' on {ref}: "
                                  f"{e.message}") from e

    async def remove_nic(self: "LXDBackend", ref: InstanceRef, name: str) -> None:
        def change(data: dict[str, Any]) -> None:
            dev = data["devices"].get(name)
            expanded = (data.get("expanded_devices") or {}).get(name)
            if dev is None and expanded is None:
                raise NotFound(f"{ref} has no device '{name}'.")
            if (dev or expanded or {}).get("type") != "nic":
                raise InvalidInput(f"'{name}' of {ref} is not a NIC.")
            if dev is None:
                profiles = ", ".join(data.get("profiles") or ()) or "a profile"
                raise Conflict(f"The NIC '{name}' of {ref} comes from its profiles "
                               f"({profiles}): change the profile, or override the device "
                               f"in the instance first.")
            del data["devices"][name]

        await self._update_instance(ref, change)

    async def set_nic_addresses(self: "LXDBackend", ref: InstanceRef, name: str,
                                ipv4: str = "", ipv6: str = "") -> None:
        """Set (or with "" clear) the static addresses of NIC ``name``. A NIC from a
        profile is first copied into the instance (an override), so the profile stays
        as it is."""
        nics = await self.list_nics(ref)
        if name not in nics:
            raise NotFound(f"{ref} has no NIC '{name}'.")
        current = nics[name]
        kind = current.get("nictype", "")
        routed = kind == "routed"
        v4 = check_addresses(ipv4, 4, many=routed, label="IPv4 address")
        v6 = check_addresses(ipv6, 6, many=routed, label="IPv6 address")
        if current.get("network"):
            subnets = await self._network_subnets(current["network"])
            self._check_in(current["network"], subnets, 4, v4)
            self._check_in(current["network"], subnets, 6, v6)
        elif kind in ("macvlan", "physical", "sriov", "p2p") and (v4 or v6):
            raise InvalidInput(f"A {kind} NIC cannot have a static address set by "
                               f"{self.product}.")

        def change(data: dict[str, Any]) -> None:
            dev = data["devices"].get(name) or dict(
                (data.get("expanded_devices") or {}).get(name) or current)
            for key, value in (("ipv4.address", v4), ("ipv6.address", v6)):
                if value:
                    dev[key] = value
                else:
                    dev.pop(key, None)
            data["devices"][name] = dev

        try:
            await self._update_instance(ref, change)
        except OperationFailed as e:
            raise OperationFailed(f"{self.product} refused the addresses of '{name}' on "
                                  f"{ref}: {e.message}") from e

    # 9. operations --------------------------------------------------------------------

    async def list_operations(self: "LXDBackend") -> list[Operation]:
        """Running and recently finished operations (the daemon keeps finished ones for a
        few seconds), running first, newest first."""
        client = self.client
        meta = await self._call(
            lambda: client.api.operations.get(params={"recursion": 1}).json()["metadata"]
            or {})
        ops = []
        for items in (meta.values() if isinstance(meta, dict) else [meta]):
            for item in items or ():
                if isinstance(item, dict):
                    ops.append(convert.to_operation(item, self.remote.name))
        ops.sort(key=lambda o: (o.done, -o.created_at.timestamp() if o.created_at else 0))
        return ops

    async def cancel_operation(self: "LXDBackend", op_id: str) -> None:
        """Cancel a running operation.

        Raises:
            NotFound: no such operation (finished long ago).
            Conflict: it has already finished.
            Unsupported: the daemon does not allow cancelling it.
        """
        client = self.client
        try:
            meta = await self._call(lambda: client.api.operations[op_id].get()
                                    .json()["metadata"])
        except NotFound:
            raise NotFound(f"There is no operation {op_id[:8]} on '{self.remote.name}' "
                           f"(it may have finished).") from None
        desc = meta.get("description") or "The operation"
        if meta.get("status") in _DONE:
            raise Conflict(f"{desc} ({op_id[:8]}) has already ended "
                           f"({str(meta.get('status')).lower()}).")
        if not meta.get("may_cancel"):
            raise Unsupported(f"{desc} ({op_id[:8]}) cannot be cancelled: "
                              f"{self.product} does not allow it; wait for it to finish.")
        try:
            await self._call(lambda: client.api.operations[op_id].delete())
        except NotFound:
            pass  # finished meanwhile


def _copied_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The instance fields a copy takes along (volatile keys stay behind, except the base
    image, which lets the target start from its own copy of that image)."""
    config = {k: v for k, v in (data.get("config") or {}).items()
              if not k.startswith("volatile.") or k == "volatile.base_image"}
    return {"type": data.get("type") or "container",
            "architecture": data.get("architecture"),
            "config": config,
            "devices": data.get("devices") or {},
            "profiles": list(data.get("profiles") or []),
            "ephemeral": bool(data.get("ephemeral")),
            "description": data.get("description") or ""}


def _done(value: str) -> asyncio.Future:
    fut: asyncio.Future = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
