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
import os
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from pylxd import exceptions as pylxd_exc

from ..base import Backend
from ..errors import InvalidInput, NotFound, OperationFailed
from ..models import Instance, InstanceRef
from ..paths import private_file
from . import convert
from .rest import Rest


class Backups(Backend):
    """Export and import of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest

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
        rest = self.rest
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
        client = rest.client
        backup = f"corral-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        expires = datetime.now(timezone.utc) + timedelta(days=1)
        body: dict[str, Any] = {
            "name": backup, "instance_only": not with_snapshots,
            "container_only": not with_snapshots, "optimized_storage": False,
            "expires_at": convert.rfc3339(expires),
        }
        if "backup_compression_algorithm" in rest.extensions:
            body["compression_algorithm"] = "gzip"
        node = client.api.instances[ref.name].backups
        report(f"creating a backup of {ref.name}")
        op_id = await rest.call(lambda: convert.operation_id(node.post(json=body).json()))
        part = path + ".part"
        made_part: list[str] = []
        try:
            meta = await rest.follow(op_id, report, timeout=3600)
            if meta.get("status") != "Success":
                raise OperationFailed(f"{rest.product} could not back up {ref}: "
                                      f"{meta.get('err') or meta.get('status')}.")
            tick = rest.reporter(progress)

            def _download(stop: threading.Event) -> int:
                try:
                    out_file = private_file(part)  # closed by the with below
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
                            tick(f"downloading {convert.mib(written)}")
                        out.flush()
                        os.fsync(out.fileno())
                finally:
                    r.close()
                if os.path.exists(path):
                    raise InvalidInput(f"{path} appeared while downloading; the backup "
                                       f"was not saved.")
                os.rename(part, path)
                tick(f"downloaded {convert.mib(written)}", True)
                return written

            written = await rest.stream(_download)
            report(f"saved {convert.mib(written)} to {path}")
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
            except Exception:  # it expires on the server within a day
                pass

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
                rest.wait(client.api.instances[ref.name].backups[backup].delete(), 120)
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
        await rest.check_free(name)
        client = rest.client
        if storage_pool:
            pools = await rest.call(
                lambda: client.api.storage_pools.get().json()["metadata"] or [])
            if storage_pool not in {convert.url_name(u) for u in pools}:
                raise InvalidInput(f"There is no storage pool '{storage_pool}' on "
                                   f"'{self.remote.name}'.")
        prefix = "X-Incus" if rest.info is not None and rest.info.server == "incus" else "X-LXD"
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
                tick(f"uploading {convert.mib(self.sent)} of {convert.mib(total)}")
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
        await rest.follow_creation(
            name, op_id, report, undo_on=(asyncio.CancelledError,),
            failed=f"Importing {os.path.basename(path)} as '{name}' failed")
        try:
            inst = await self.get_instance(rest.ref_of(name))
        except NotFound:
            raise OperationFailed(f"{rest.product} reported the import done, but there is "
                                  f"no '{name}' (the file may name another instance and "
                                  f"this server ignored the new name).") from None
        rest.names.add(name)
        report("done")
        return inst
