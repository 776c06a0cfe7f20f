"""Copies, names and backups of stopped LXC containers: clone and rename (``lxc-copy``), the
description (a config comment), export to a tar archive and import from one. Long tools run
in their own process group; on failure or cancellation nothing half-made is left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from ..archive import ArchiveRefused
from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from ..paths import export_target, private_file, publish_export
from ..work import in_thread
from . import parse
from .archive import (SettingsRefused, config_problems, mapped_root_gid,
                      read_container_archive, with_baseline)
from .tools import LXCTools, read_file, replace_file


class Transfer(Backend):
    """Clone, rename, description, export and import of
    :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def _require_stopped(self, ref: InstanceRef, what: str) -> str:
        """The config text of a stopped container (else Conflict)."""
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            raise Conflict(f"{ref} is {current.status.value}: stop it first to {what} it.")
        return self.lxc.config(ref.name)

    def _move_snapshot_configs(self, name: str, old_dir: str) -> None:
        """After a container's snapshots were copied or moved to ``name``'s directory: point
        their configs at their new rootfs and name."""
        new_dir = str(self.lxc.dir(name))
        for snap in self.lxc.snapshot_dirs(name):
            cfg = snap / "config"
            replace_file(cfg, _rewrite_config(read_file(cfg), old_dir, new_dir, name,
                                              str(snap / "rootfs")))

    async def _destroy_partial(self, name: str) -> None:
        """Remove a half-made container (lxc-destroy first: it also drops the name from a
        source's list of clones), shielded from cancellation."""
        directory = self.lxc.dir(name)

        async def destroy() -> None:
            if (directory / "config").is_file():
                with contextlib.suppress(BackendError):
                    await self.lxc.run("lxc-destroy", "-n", name, "-s", timeout=300)
            if directory.exists():
                await asyncio.to_thread(shutil.rmtree, directory, True)
        await asyncio.shield(destroy())

    async def clone_instance(self, ref: InstanceRef, new_name: str, *, linked: bool = False,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Copy a stopped container with ``lxc-copy`` (a new MAC for each NIC with a fixed
        one, the new name as host name; the description comment goes along).

        ``linked=True``: ``lxc-copy -s``, a snapshot clone. On a ``dir`` backing store LXC
        makes it an ``overlay`` clone (the source's rootfs as lower layer, the clone's own
        delta above); the host kernel must offer overlayfs. LXC then refuses to destroy or
        rename the source while the clone exists ("has clones"); :meth:`delete` and
        :meth:`rename_instance` say so, naming the clones. ``with_snapshots`` does not apply
        (the snapshots stay with the source).

        Full clone: ``lxc-copy`` (rsync; ``-B dir`` flattens an overlay clone into a plain
        directory). lxc-copy does not copy snapshots: with ``with_snapshots``, corral copies
        ``snaps/`` itself (``cp -a``) and points their configs at the clone.

        No percentage is available from lxc-copy: progress says what is being done. On
        failure or cancellation the clone is destroyed.

        Raises:
            Conflict: the container is not stopped, or ``new_name`` is taken.
            InvalidInput: bad name.
            OperationFailed: lxc-copy failed (its message).
        """
        say = progress or (lambda _text: None)
        config = await self._require_stopped(ref, "clone")
        self.lxc.check_new_name(new_name)
        kind, _ = parse.rootfs(config)
        argv = ["lxc-copy", "-P", self.lxc.path, "-n", ref.name, "-N", new_name]
        if linked:
            argv.append("-s")
        elif kind == "overlay":
            argv += ["-B", "dir"]
        snapshots = self.lxc.snapshot_dirs(ref.name) if with_snapshots and not linked else []
        try:
            say("creating an overlay clone…" if linked else "copying the root file system…")
            await self.lxc.run_long(*argv, what=f"lxc-copy of {ref} to {new_name}")
            if snapshots:
                say(f"copying {len(snapshots)} snapshot(s)…")
                await self.lxc.run_long("cp", "-a", "--reflink=auto", "--",
                                        str(self.lxc.dir(ref.name) / "snaps"),
                                        str(self.lxc.dir(new_name) / "snaps"),
                                        what=f"copying the snapshots of {ref}")
                self._move_snapshot_configs(new_name, str(self.lxc.dir(ref.name)))
        except BaseException:
            await self._destroy_partial(new_name)
            raise
        say("cloned")
        return await self.lxc.read_instance(new_name, InstanceStatus.STOPPED)

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped container with ``lxc-copy -R`` (directory, rootfs path and host
        name follow). lxc-copy refuses containers with snapshots; corral moves ``snaps/``
        aside for the rename and back after it, pointing their configs at the new name.

        Not possible, said in words: a container that has linked (overlay) clones (LXC
        tracks them by name: :class:`Conflict` naming them), and an overlay clone itself
        (:class:`Unsupported`: LXC's overlay driver only makes snapshots).

        Raises:
            Conflict: not stopped, name taken, or it has linked clones.
            InvalidInput: bad name.
            Unsupported: an overlay clone.
            OperationFailed: lxc-copy failed (everything is put back).
        """
        config = await self._require_stopped(ref, "rename")
        self.lxc.check_new_name(new_name)
        clones = self.lxc.clones_of(ref.name)
        if clones:
            raise Conflict(f"{ref} has linked clone(s) ({', '.join(clones)}) that LXC tracks "
                           f"by its name: it cannot be renamed while they exist.")
        if parse.rootfs(config)[0] == "overlay":
            raise Unsupported(f"{ref} is a linked (overlay) clone: lxc-copy cannot rename "
                              f"one (its overlay driver only makes snapshots). A full clone "
                              f"under the new name, then deleting this one, does it.")
        old_dir, new_dir = self.lxc.dir(ref.name), self.lxc.dir(new_name)
        snaps, aside = old_dir / "snaps", Path(self.lxc.path) / f".corral-snaps-{ref.name}"
        moved = False
        if snaps.is_dir() and any(snaps.iterdir()):
            if aside.exists():
                raise Conflict(f"{aside} exists: an earlier rename of {ref} was interrupted. "
                               f"Move it back to {snaps} first.")
            os.rename(snaps, aside)
            moved = True
        try:
            # lxc-copy -R copies, then destroys the original
            await self.lxc.run_long("lxc-copy", "-P", self.lxc.path, "-n", ref.name, "-R",
                                    "-N", new_name, what=f"lxc-copy renaming {ref}")
        except BaseException:
            if (old_dir / "config").is_file():  # the original is intact: drop a half copy
                if new_dir.exists():
                    await self._destroy_partial(new_name)
                if moved and not snaps.exists():
                    os.rename(aside, snaps)
            raise
        if moved:
            os.rename(aside, new_dir / "snaps")
            self._move_snapshot_configs(new_name, str(old_dir))
        self.lxc.previous.pop(ref, None)
        return await self.get_instance(self.lxc.ref(new_name))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        """Keep ``text`` as a ``# corral.description: "<json>"`` comment line in the
        container's config: LXC has no description, ignores comments, and lxc-copy (clone,
        rename) and lxc-snapshot copy the config text with them. Restoring a snapshot brings
        back the description the snapshot had."""
        self.lxc.require(ref)
        lines = [line for line in self.lxc.config(ref.name).splitlines()
                 if not line.startswith(parse.DESCRIPTION)]
        if text:
            lines.append(f"{parse.DESCRIPTION} {json.dumps(text)}")
        self.lxc.write_config(ref.name, lines)

    async def export_instance(self, ref: InstanceRef, path: str, *, with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write a stopped, ``dir``-backed container to a new tar archive at ``path``
        (gzip when it ends with ``.gz``/``.tgz``): ``config``, ``rootfs/`` and, with
        ``with_snapshots``, ``snaps/``; ``tar --numeric-owner --xattrs`` keeps owners
        (also shifted ones of unprivileged containers), modes, devices and file
        capabilities. Written to ``path + ".part"``, renamed when complete; nothing is
        left on failure or cancellation. Returns the archive's size in bytes.

        Raises:
            Conflict: not stopped.
            Unsupported: not on a ``dir`` backing store (an overlay clone shares its
                source's files: make a full clone first).
            InvalidInput: ``path`` exists, or its directory does not.
            OperationFailed: tar failed.
        """
        say = progress or (lambda _text: None)
        config = await self._require_stopped(ref, "export")
        kind, _ = parse.rootfs(config)
        if kind != "dir":
            raise Unsupported(
                f"{ref} is on a '{kind or 'unknown'}' backing store; only directory-backed "
                f"containers are exported" + (" (a linked clone shares its source's files: "
                                              "make a full clone and export that)"
                                              if kind == "overlay" else "") + ".")
        path, part = export_target(path)
        members = ["./config", "./rootfs"]
        if with_snapshots and self.lxc.snapshot_dirs(ref.name):
            members.append("./snaps")
        argv = ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C",
                str(self.lxc.dir(ref.name)), "-cpf", part]
        if path.endswith((".gz", ".tgz")):
            argv.append("-z")

        async def report() -> None:
            while True:
                await asyncio.sleep(0.5)
                with contextlib.suppress(OSError):
                    say(f"writing {os.path.basename(path)}: "
                        f"{os.path.getsize(part) >> 20} MiB")

        reporter = asyncio.ensure_future(report())
        try:
            private_file(part).close()  # 0600 from the start: tar writes into it
            say("writing…")
            await self.lxc.run_long(*argv, "--", *members, what=f"tar of {ref}")
            publish_export(part, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        finally:
            reporter.cancel()
        say("exported")
        return os.path.getsize(path)

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create the container ``name`` from an archive written by :meth:`export_instance`.

        The archive is read once, by the one archive reader (:mod:`backends.archive`, the
        rules of :class:`~backends.lxc.archive.ContainerArchive`): each member is checked,
        then extracted from the same stream into the container's new directory, private
        (0700) until the import is complete, then 0770 and owned by corral's user like
        the ones lxc-create makes (the archive's own top directory is never applied).
        Only ``config``, ``rootfs/`` and ``snaps/``; canonical names, no duplicates; links
        and devices only strictly inside a root file system; configs holding only the
        settings of :func:`~backends.lxc.archive.config_problems`' allow-list, else
        refused naming them. The configs are not unpacked: corral writes them from the
        checked bytes, last, with corral's baseline added where the distribution's common
        include is missing (:func:`~backends.lxc.archive.with_baseline`), ``lxc.rootfs.path``
        and ``lxc.uts.name`` set and nothing else changed, and checked again as written
        (:func:`_imported_config`). NIC MAC addresses are kept. Nothing is left on failure or
        cancellation.

        Raises:
            InvalidInput: bad name, ``storage_pool`` given, missing file, damaged, foreign
                or refused archive.
            Conflict: the name is taken.
            OperationFailed: writing the files failed.
        """
        say = progress or (lambda _text: None)
        if storage_pool:
            raise InvalidInput("LXC containers have no storage pools here.")
        self.lxc.check_new_name(name)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"{path} does not exist or is not a file.")
        directory = self.lxc.dir(name)
        os.makedirs(self.lxc.path, exist_ok=True)
        try:
            directory.mkdir(mode=0o700)  # claims the name; listed once config is written
        except FileExistsError:
            raise Conflict(f"A container named '{name}' already exists in "
                           f"{self.lxc.path}.") from None
        try:
            try:
                configs = await in_thread(read_container_archive, path, directory,
                                          progress=say)
            except SettingsRefused as e:
                raise InvalidInput(f"{path} was not imported: {e}.") from None
            except ArchiveRefused as e:
                raise InvalidInput(f"{path} is not an exported LXC container: {e}.") \
                    from None
            except OSError as e:
                raise OperationFailed(f"Importing {path} failed: "
                                      f"{e.strerror or e} ({e.filename or path}).") from e
            config = configs.pop("config").decode(errors="replace")
            for member, data in sorted(configs.items()):
                snap = directory / os.path.dirname(member)
                replace_file(snap / "config", _imported_config(
                    data.decode(errors="replace"), name, snap / "rootfs"))
            replace_file(directory / "config", _imported_config(config, name,
                                                                directory / "rootfs"))
            _seal(directory, mapped_root_gid(config))
        except BaseException:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, directory, True))
            raise
        say("imported")
        return await self.lxc.read_instance(name, InstanceStatus.STOPPED)


def _seal(directory: Path, root_gid: int | None) -> None:
    """An imported container's directory, whatever the archive said: corral's user and
    0770 like lxc-create's; for a container with an id map, the group of its root,
    0750, so that root can reach its rootfs but not change the directory (through a
    descriptor: never a link's target)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchown(fd, os.geteuid(), os.getegid() if root_gid is None else root_gid)
        os.fchmod(fd, 0o770 if root_gid is None else 0o750)
    finally:
        os.close(fd)


def _imported_config(text: str, name: str, rootfs: Path) -> str:
    """An archive's checked config as corral writes it: the baseline where it is due,
    ``lxc.rootfs.path`` and ``lxc.uts.name`` set, and nothing else changed — the other
    values are the ones the allow-list passed (rewriting paths that named the archive's
    old directory moved ``lxc.include``'s common.conf and the seccomp policy into the
    new one, where they are not). Checked again as written.

    Raises:
        InvalidInput: what would be written does not pass the allow-list.
    """
    written = _rewrite_config(with_baseline(text), "", "", name, str(rootfs))
    refused = config_problems(written)
    if refused:  # never, while the rewrite changes only those two keys
        raise InvalidInput(f"The archive was not imported: its config would be written "
                           f"with settings corral does not accept: {'; '.join(refused[:5])}.")
    return written


def _rewrite_config(text: str, old_dir: str, new_dir: str, new_name: str,
                    rootfs: str) -> str:
    """A container's (or one of its snapshots') config moved from ``old_dir`` to
    ``new_dir``: ``lxc.rootfs.path`` becomes ``dir:<rootfs>``, ``lxc.uts.name`` the new
    name, and other values naming the old directory (fstab, log file) name the new one."""
    old = re.compile(re.escape(old_dir.rstrip("/")) + r"(?=/|\s|$)")
    out = []
    seen_uts = False
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        key = key.strip()
        if eq and not key.startswith("#"):
            if key == "lxc.rootfs.path":
                line = f"lxc.rootfs.path = dir:{rootfs}"
            elif key == "lxc.uts.name":
                line, seen_uts = f"lxc.uts.name = {new_name}", True
            elif old_dir and old.search(value):
                line = f"{key} = {old.sub(new_dir, value.strip())}"
        out.append(line)
    if not seen_uts:
        out.append(f"lxc.uts.name = {new_name}")
    return "\n".join(out) + "\n"
