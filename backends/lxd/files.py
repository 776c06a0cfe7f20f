"""Files inside LXD/Incus instances: the ``/1.0/instances/<name>/files`` API.

``GET`` on a directory answers its names, on a file its content, on a symlink its target
(extension ``file_get_symlink``); ``HEAD`` answers type, mode, uid and gid without the
content (``instance_file_head``); ``POST`` creates a file, directory or symlink with the
mode and owner given in ``X-LXD-*`` / ``X-Incus-*`` headers. The daemon resolves paths
inside the instance, so a symlink never leads out of it.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import threading
import time
from typing import Any, Callable

from ..base import Backend
from ..errors import BackendError, InvalidInput, NotFound, OperationFailed
from ..models import FileEntry, InstanceRef
from .known import Known
from .lazy import pylxd_exc
from .rest import Rest
from .sftp import SFTPChannel, SFTPError

_CHUNK = 1 << 20
_LIST_THREADS = 3
"""Of the remote's 4 pool threads, how many a directory listing uses at once."""
SFTP_RETRY = 30.0
"""Seconds before an instance whose SFTP channel failed is tried through it again (a VM
whose agent was not up yet; meanwhile the ``/files`` API lists it)."""


def _entry(path: str, headers: Any, prefix: str, size: int = 0) -> FileEntry:
    def h(key: str, default: str) -> str:
        return str(headers.get(f"{prefix}-{key}") or headers.get(f"X-LXD-{key}") or default)

    kind = h("type", "file")
    try:
        mode = int(h("mode", "0644"), 8) & 0o7777
    except ValueError:
        mode = 0o644
    return FileEntry(path=path, kind=kind if kind in ("file", "directory", "symlink")
                     else "other", size=size, mode=mode, uid=int(h("uid", "0")),
                     gid=int(h("gid", "0")))


class SFTPChannels:
    """What the instance SFTP channels taught this backend: whether the daemon has them,
    which instances' failed lately, and the last listing's entries."""

    def __init__(self) -> None:
        self.absent = False
        """The daemon has no ``/sftp`` endpoint (it said 404): ``/files`` lists."""
        self.failed: dict[InstanceRef, float] = {}
        self.listed: dict[tuple[InstanceRef, str], list[FileEntry]] = {}
        """An instance's last listing, for the :meth:`Files.stat_files` that follows its
        names (one per instance)."""
        self.lock = threading.Lock()


class Files(Backend):
    """``list_files`` (``list_names`` then ``stat_files``), ``read_file``, ``write_file``
    over the file API; listings through the instance's SFTP channel where the daemon has
    one (:mod:`.sftp`: every entry with its details in one round trip)."""

    rest: Rest
    known: Known
    sftp: SFTPChannels

    @property
    def _prefix(self) -> str:
        info = self.known.info
        return "X-Incus" if info is not None and info.server == "incus" else "X-LXD"

    def _refusal(self, ref: InstanceRef, path: str, e: BaseException, *,
                 writing: bool = False) -> BackendError:
        if isinstance(e, pylxd_exc.NotFound):
            if writing:
                return OperationFailed(f"Cannot create {path} in {ref}: the directory "
                                       f"{posixpath.dirname(path)} does not exist there.")
            return NotFound(f"{path} does not exist in {ref}.")
        if isinstance(e, pylxd_exc.LXDAPIException):
            try:
                text = str(e.response.json().get("error") or e)
            except ValueError:
                text = str(e)
            low = text.lower()
            if "permission denied" in low or low == "forbidden":
                return OperationFailed(f"Permission denied for {path} in {ref}.")
            if "no space" in low:
                return OperationFailed(f"No space left in {ref} for {path}.")
            if "not running" in low or "agent" in low:
                return OperationFailed(f"{ref} must be running for its files ({text}).")
            return OperationFailed(f"{path} in {ref}: {text}")
        return self.rest.map_error(e)

    async def list_files(self, ref: InstanceRef, path: str) -> list[FileEntry]:
        return await self.stat_files(ref, path, await self.list_names(ref, path))

    async def list_names(self, ref: InstanceRef, path: str) -> list[str]:
        """The names in directory ``path``, in one round trip (``GET`` answers them; the
        file panel shows them before their details, :meth:`stat_files`). Through the
        instance's SFTP channel the details come in the same round trip: they are kept for
        the :meth:`stat_files` that follows, which then answers at once."""
        listed = await self._sftp_list(ref, path)
        if listed is not None:
            with self.sftp.lock:
                # one kept per instance: a listing whose details were never asked for
                # (another directory chosen meanwhile) does not stay behind
                for key in [k for k in self.sftp.listed if k[0] == ref]:
                    del self.sftp.listed[key]
                self.sftp.listed[(ref, path)] = listed
            return sorted(e.name for e in listed)
        node = self.rest.client.api.instances[ref.name].files
        prefix = self._prefix

        def _names() -> list[str]:
            try:
                r = node.get(params={"path": path})
            except Exception as e:  # put in words below
                raise self._refusal(ref, path, e) from e
            if str(r.headers.get(f"{prefix}-Type") or r.headers.get("X-LXD-Type")) \
                    != "directory":
                raise InvalidInput(f"{path} is not a directory.")
            names = r.json().get("metadata") or []
            return sorted(n for n in names if isinstance(n, str) and n and "/" not in n)

        return await self.rest.call(_names)

    async def stat_files(self, ref: InstanceRef, path: str, names: list[str]
                         ) -> list[FileEntry]:
        """Type, mode and owner (and a symlink's target) of ``names`` in ``path``: what
        the SFTP listing of :meth:`list_names` read, else one ``HEAD`` each (and a ``GET``
        per symlink), in slices over the remote's pool."""
        with self.sftp.lock:
            listed = self.sftp.listed.pop((ref, path), None)
        if listed is not None:
            wanted = set(names)
            return sorted((e for e in listed if e.name in wanted), key=lambda e: e.path)
        node = self.rest.client.api.instances[ref.name].files
        prefix = self._prefix

        def _stat(names: list[str]) -> list[FileEntry]:
            from ._pylxd_compat import api_endpoint  # (pylxd is loaded: node is its)

            entries = []
            for name in names:
                child = posixpath.join(path, name)
                head = node.session.head(api_endpoint(node), params={"path": child},
                                         timeout=self.timeout)
                if head.status_code != 200:
                    continue  # vanished meanwhile, or unreadable: not listed
                entry = _entry(child, head.headers, prefix)
                if entry.kind == "symlink":
                    target = node.get(params={"path": child}, is_api=False)
                    entry = FileEntry(child, "symlink", 0, entry.mode, entry.uid, entry.gid,
                                      target.content.decode(errors="replace"))
                entries.append(entry)
            return entries

        # in slices over the remote's pool, which halves the time of a big directory
        slices = [names[i::_LIST_THREADS] for i in range(_LIST_THREADS)]
        parts = await asyncio.gather(*(self.rest.call(_stat, part, timeout=self.timeout * 10)
                                       for part in slices if part))
        return sorted((e for part in parts for e in part), key=lambda e: e.path)

    async def _sftp_list(self, ref: InstanceRef, path: str) -> list[FileEntry] | None:
        """``path``'s entries with their details through the instance's SFTP channel, or
        None where there is none (an older daemon, a VM without its agent, any failure:
        the ``/files`` API then lists it and says what is wrong in its own words)."""
        channels = self.sftp
        if channels.absent or ref.project != self.remote.project:
            return None
        with channels.lock:
            if time.monotonic() - channels.failed.get(ref, -SFTP_RETRY) < SFTP_RETRY:
                return None

        def _list() -> list[FileEntry] | None:
            # a channel per listing: an open one (its server process in the instance)
            # keeps LXD from stopping the instance until it closes
            try:
                channel = SFTPChannel.open(self.rest.remote, ref.name, self.timeout)
            except (OSError, SFTPError) as e:
                with channels.lock:
                    if isinstance(e, SFTPError) and e.http_status in (400, 404, 405, 501):
                        channels.absent = True  # an older daemon: no such endpoint
                    else:
                        channels.failed[ref] = time.monotonic()
                return None
            try:
                return channel.listdir(path)
            except (OSError, SFTPError) as e:
                if not isinstance(e, SFTPError) or not e.in_step:
                    with channels.lock:
                        channels.failed[ref] = time.monotonic()  # the channel, not the path
                return None
            finally:
                channel.close()

        return await self.rest.call(_list)

    async def read_file(self, ref: InstanceRef, entry: FileEntry, local: str,
                        progress: Callable[[int], None] | None = None) -> None:
        node = self.rest.client.api.instances[ref.name].files
        loop = asyncio.get_running_loop()

        def _pull(stop: threading.Event) -> None:
            try:
                r = node.get(params={"path": entry.path}, stream=True, is_api=False,
                             timeout=(self.timeout, 300))
            except Exception as e:
                raise self._refusal(ref, entry.path, e) from e
            try:
                fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as e:
                r.close()
                raise OperationFailed(f"Cannot write {local}: {e.strerror}.") from None
            done = 0
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in r.iter_content(_CHUNK):
                        if stop.is_set():
                            raise asyncio.CancelledError()
                        out.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            loop.call_soon_threadsafe(progress, done)
                os.chmod(local, entry.mode & 0o777)  # no setuid bits from a server
            except OSError as e:  # the local disk: full, gone, refused
                os.unlink(local)
                raise OperationFailed(f"Cannot write {local}: {e.strerror or e}.") from None
            except BaseException:
                os.unlink(local)
                raise
            finally:
                r.close()

        await self.rest.stream(_pull)

    async def write_file(self, ref: InstanceRef, entry: FileEntry, local: str | None = None,
                         progress: Callable[[int], None] | None = None) -> None:
        node = self.rest.client.api.instances[ref.name].files
        prefix = self._prefix
        loop = asyncio.get_running_loop()
        headers = {f"{prefix}-Type": entry.kind, f"{prefix}-Uid": str(entry.uid),
                   f"{prefix}-Gid": str(entry.gid), f"{prefix}-Mode": f"{entry.mode:04o}",
                   f"{prefix}-Write": "overwrite", "Content-Type": "application/octet-stream"}
        if entry.kind not in ("file", "directory", "symlink"):
            raise InvalidInput(f"{entry.path}: only files, directories and symlinks are "
                               f"copied.")

        def _push(stop: threading.Event) -> None:
            body: Any
            f = None
            if entry.kind == "file":
                if local is None:
                    raise InvalidInput("No local file to push.")
                f = open(local, "rb")  # closed in finally
                body = _Body(f, os.fstat(f.fileno()).st_size, stop, loop, progress)
            elif entry.kind == "symlink":
                body = entry.target.encode()
            else:
                body = b""
            try:
                node.post(params={"path": entry.path}, data=body, headers=headers,
                          timeout=(self.timeout, 900))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                raise self._refusal(ref, entry.path, e, writing=True) from e
            finally:
                if f is not None:
                    f.close()

        await self.rest.stream(_push)


class _Body:
    """A local file as a sized request body that stops when cancelled and reports."""

    def __init__(self, f: Any, total: int, stop: threading.Event,
                 loop: asyncio.AbstractEventLoop, progress: Callable[[int], None] | None):
        self.f, self.total, self.stop, self.sent = f, total, stop, 0
        self.loop, self.progress = loop, progress

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Any:
        while chunk := self.read(_CHUNK):
            yield chunk

    def read(self, n: int = -1) -> bytes:
        if self.stop.is_set():
            raise asyncio.CancelledError()
        chunk = self.f.read(n if n and n > 0 else _CHUNK)
        self.sent += len(chunk)
        if self.progress is not None:
            self.loop.call_soon_threadsafe(self.progress, self.sent)
        return chunk
