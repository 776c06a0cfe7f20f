"""Backups of LXD/Incus instances: export to a file and import from one.

Wire facts (``docs/protocols.md``, section "LXD/Incus REST"; verified on LXD 5.0.2 and
Incus 6.0 in the lab): ``POST /1.0/instances/<n>/backups`` is an operation; the file is
``GET …/backups/<b>/export`` (raw bytes); ``expires_at`` makes the daemon delete a backup
corral could not delete itself. Import is ``POST /1.0/instances`` with the tarball as body;
the new name goes in ``X-LXD-name`` (LXD) / ``X-Incus-name`` (Incus), API extension
``backup_override_name``, the pool in ``X-LXD-pool`` / ``X-Incus-pool``. Each server ignores
the other's header (then the name inside the backup is used).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from ..base import Backend
from ..errors import InvalidInput, NotFound, OperationFailed
from ..models import Instance, InstanceRef
from ..paths import private_file
from . import convert
from .known import Known
from .lazy import pylxd_exc
from .ops import Ops
from .rest import Rest


class Backups(Backend):
    """Export and import of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    known: Known

    # Export --------------------------------------------------------------------------

    async def export_instance(self, ref: InstanceRef, path: str, *,
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
        path = _export_path(path)
        await self.get_instance(ref)  # NotFound in words before anything is made
        backup, op_id = await self._start_backup(ref, with_snapshots, report)
        try:
            meta = await self.ops.follow(op_id, report, timeout=3600)
            if meta.get("status") != "Success":
                raise OperationFailed(f"{self.rest.product} could not back up {ref}: "
                                      f"{meta.get('err') or meta.get('status')}.")
            export = self.rest.client.api.instances[ref.name].backups[backup].export
            tick = self.rest.reporter(progress)
            written = await self.rest.stream(lambda stop: _download(
                lambda: export.get(stream=True, timeout=(self.timeout, 300)), path, stop, tick))
            report(f"saved {convert.mib(written)} to {path}")
            return written
        finally:
            cleanup = asyncio.ensure_future(self._delete_backup(ref, backup, op_id))
            try:
                await asyncio.shield(cleanup)
            except Exception:  # it expires on the server within a day
                pass

    async def _start_backup(self, ref: InstanceRef, with_snapshots: bool,
                            report: Callable[[str], None]) -> tuple[str, str]:
        """Ask the daemon for a backup of ``ref`` that expires within a day (should corral
        not delete it); its name and operation."""
        backup = f"corral-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        expires = datetime.now(timezone.utc) + timedelta(days=1)
        body: dict[str, Any] = {
            "name": backup, "instance_only": not with_snapshots,
            "container_only": not with_snapshots, "optimized_storage": False,
            "expires_at": convert.rfc3339(expires),
        }
        if "backup_compression_algorithm" in self.known.extensions:
            body["compression_algorithm"] = "gzip"
        node = self.rest.client.api.instances[ref.name].backups
        report(f"creating a backup of {ref.name}")
        op_id = await self.rest.call(lambda: convert.operation_id(node.post(json=body).json()))
        return backup, op_id

    async def _delete_backup(self, ref: InstanceRef, backup: str, op_id: str) -> None:
        rest = self.rest
        client = rest.client

        def _do() -> None:
            # a backup still being made cannot be deleted: let its operation end first
            try:
                client.api.operations[op_id].wait.get(params={"timeout": 120}, timeout=130)
            except pylxd_exc.LXDAPIException:
                pass
            try:
                self.ops.wait(client.api.instances[ref.name].backups[backup].delete(), 120)
            except pylxd_exc.NotFound:
                pass

        await rest.call(_do, timeout=300)

    # Import --------------------------------------------------------------------------

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create instance ``name`` from a backup file (``export_instance``/``lxc export``),
        snapshots included when the backup has them.

        Raises:
            InvalidInput: no such file, a bad name, an unknown pool (nothing sent).
            Conflict: ``name`` is taken (checked before uploading).
            OperationFailed: the daemon refused the file (nothing is left behind).
        """
        rest = self.rest
        report = progress or (lambda text: None)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"There is no file {path}.")
        if not os.access(path, os.R_OK):
            raise InvalidInput(f"Cannot read {path}.")
        await self.known.check_free(name)
        client = rest.client
        if storage_pool:
            pools = await rest.call(
                lambda: client.api.storage_pools.get().json()["metadata"] or [])
            if storage_pool not in {convert.url_name(u) for u in pools}:
                raise InvalidInput(f"There is no storage pool '{storage_pool}' on "
                                   f"'{self.remote.name}'.")
        info = self.known.info
        prefix = "X-Incus" if info is not None and info.server == "incus" else "X-LXD"
        headers = {"Content-Type": "application/octet-stream", f"{prefix}-name": name}
        if storage_pool:
            headers[f"{prefix}-pool"] = storage_pool
        total = os.path.getsize(path)
        tick = rest.reporter(progress)

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
                tick(f"uploading {convert.mib(self.sent)} of {convert.mib(total)}", False)
                return chunk

        def _upload(stop: threading.Event) -> str:
            with open(path, "rb") as f:
                r = client.api.instances.post(data=_Body(f, stop), headers=headers,
                                              timeout=(self.timeout, 900))
            tick(f"uploaded {convert.mib(total)}", True)
            return convert.operation_id(r.json())

        report(f"uploading {os.path.basename(path)} ({convert.mib(total)})")
        try:
            op_id = await rest.stream(_upload)
        except OperationFailed as e:
            raise OperationFailed(f"{rest.product} refused {os.path.basename(path)}: "
                                  f"{e.message}") from e
        # cancelled: the import may still be running; cancel or outwait it, then delete
        await self.ops.follow_creation(
            name, op_id, report, undo_on=(asyncio.CancelledError,),
            failed=f"Importing {os.path.basename(path)} as '{name}' failed")
        try:
            inst = await self.get_instance(self.known.ref_of(name))
        except NotFound:
            raise OperationFailed(f"{rest.product} reported the import done, but there is "
                                  f"no '{name}' (the file may name another instance and "
                                  f"this server ignored the new name).") from None
        self.known.names.add(name)
        report("done")
        return inst


def _export_path(path: str) -> str:
    """The absolute file an export writes: new, in a folder that exists and is writable."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path):
        raise InvalidInput(f"{path} already exists: choose another file name (corral "
                           f"does not overwrite files).")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise InvalidInput(f"There is no folder {folder}.")
    if not os.access(folder, os.W_OK):
        raise InvalidInput(f"Cannot write in {folder}.")
    return path


def _download(get: Callable[[], Any], path: str, stop: threading.Event,
              tick: Callable[[str, bool], None]) -> int:
    """(In a pool thread) write the response of ``get`` into ``path.part``, then rename it
    to ``path``; the bytes written. ``stop`` set ends it between chunks; whatever ends it
    early, the ``.part`` it made goes again."""
    part = path + ".part"
    try:
        out_file = private_file(part)  # closed by the with below
    except FileExistsError:
        raise InvalidInput(f"{part} exists (another export to the same file?); "
                           f"remove it or choose another name.") from None
    except OSError as e:
        raise OperationFailed(f"Cannot write {part}: {e.strerror or e}") from None
    try:
        r = get()
        written = 0
        try:
            with out_file as out:
                for chunk in r.iter_content(1 << 20):
                    if stop.is_set():
                        raise asyncio.CancelledError()
                    out.write(chunk)
                    written += len(chunk)
                    tick(f"downloading {convert.mib(written)}", False)
                out.flush()
                os.fsync(out.fileno())
        finally:
            r.close()
        if os.path.exists(path):
            raise InvalidInput(f"{path} appeared while downloading; the backup "
                               f"was not saved.")
        os.rename(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)  # only the .part this export made
        raise
    tick(f"downloaded {convert.mib(written)}", True)
    return written
