"""Durable files of the QEMU backend: ``vm.json`` written so that a kill -9 or a power cut
at any moment leaves the old or the new definition (never a torn one), disk-full errors in
words, and the markers that let the next start sweep what an interrupted creation, import,
clone or export left behind.

A marker holds the pid and start time of the corral process doing the work, so a sweep
only removes leftovers of processes that are gone (a second corral working beside this
one keeps its half-made VM)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import OperationFailed
from ..paths import UntrustedFile, read_owned

log = logging.getLogger(__name__)

PARTIAL = ".corral-partial"
"""In a VM directory that is being made: the directory is removed if its maker dies."""
RENAMING = ".corral-renaming"
"""In a VM directory being renamed: what the rename changes, so that the next start
completes it (directory already moved) or undoes it (not moved) if corral was killed."""
EXPORT_PREFIX = ".corral-export-"
"""Scratch directories of exports (in the VM root); ``target`` names the ``.part`` file."""


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_token() -> str:
    """This process, as a marker records it: ``<pid> <start time>``."""
    return f"{os.getpid()} {_start_time(os.getpid())}"


def owner_alive(token: str) -> bool:
    """Whether the process a marker names still runs (the same process, not a new one
    with a recycled pid)."""
    try:
        pid_text, started = token.split()
        pid = int(pid_text)
    except ValueError:
        return False
    return _start_time(pid) == started


def in_words(e: OSError, what: str) -> str:
    """An OS error while writing ``what``, for a user."""
    if e.errno == errno.ENOSPC:
        return f"The disk holding {what} is full: free some space and try again."
    if e.errno == errno.EDQUOT:
        return f"Your disk quota is exhausted ({what}): free some space and try again."
    if e.errno == errno.EROFS:
        return f"{what} is on a read-only file system."
    return f"Writing {what} failed: {e.strerror or e}."


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PendingWrite:
    """A file written in full and flushed to disk under a temporary name, put in place by
    :meth:`commit` (an atomic rename, then the directory flushed). Until then the old file
    stands; :meth:`discard` removes the temporary one. Preparing first lets a caller learn
    that the disk is full before it changes anything else."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            self.discard()
            raise OperationFailed(in_words(e, str(path))) from e

    def commit(self) -> None:
        try:
            os.replace(self.tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as e:
            self.discard()
            raise OperationFailed(in_words(e, str(self.path))) from e

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def write_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically and durably.

    Raises:
        OperationFailed: the write failed (disk full, ...), in words; ``path`` is as it was.
    """
    PendingWrite(path, data).commit()


def mark_partial(directory: Path) -> None:
    """Mark a VM directory being made (see :func:`sweep`)."""
    try:
        (directory / PARTIAL).write_text(owner_token())
    except OSError as e:
        raise OperationFailed(in_words(e, str(directory))) from e


def unmark_partial(directory: Path) -> None:
    with contextlib.suppress(OSError):
        (directory / PARTIAL).unlink()
    with contextlib.suppress(OSError):
        fsync_dir(directory)


@contextlib.contextmanager
def building(directory: Path):
    """Fill the new VM directory ``directory`` in the block: it is marked partial meanwhile
    (what a crash leaves, :func:`sweep` removes) and unmarked at the end; on any failure it
    is removed, and an OSError is said in words (:class:`OperationFailed`)."""
    try:
        mark_partial(directory)
        yield
        unmark_partial(directory)
    except BaseException as e:
        shutil.rmtree(directory, ignore_errors=True)
        if isinstance(e, OSError):
            raise OperationFailed(in_words(e, str(directory))) from e
        raise


def sweep(root: Path) -> list[str]:
    """Remove what interrupted work of dead corral processes left under ``root``: VM
    directories still marked partial, temporary definition files, export scratch
    directories and their ``.part`` archives. Returns what was removed."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for entry in root.iterdir():
        try:
            if entry.name.startswith(EXPORT_PREFIX) and entry.is_dir():
                removed += _sweep_export(entry)
            elif entry.is_dir() and not entry.is_symlink():
                removed += _sweep_vm_dir(entry)
        except (OSError, UntrustedFile) as e:  # a planted marker or journal: left alone
            log.warning("sweeping %s: %s", entry, e)
    for what in removed:
        log.warning("removed a leftover of an interrupted corral: %s", what)
    return removed


def write_rename_journal(directory: Path, old: str, new: str,
                         disks: list[tuple[str, str, str]]) -> None:
    """Record a rename of the VM in ``directory`` from ``old`` to ``new``; ``disks`` are
    the overlays it moves the backing files of: (disk path, old backing, new backing)."""
    data = {"owner": owner_token(), "from": old, "to": new,
            "disks": [list(d) for d in disks]}
    write_durably(directory / RENAMING, json.dumps(data).encode())


def drop_rename_journal(directory: Path) -> None:
    with contextlib.suppress(OSError):
        (directory / RENAMING).unlink()


def _finish_rename(directory: Path) -> list[str]:
    """Complete or undo the rename a dead corral left half-done in ``directory``."""
    journal = directory / RENAMING
    data = json.loads(read_owned(journal))
    if owner_alive(str(data.get("owner", ""))):
        return []
    moved = directory.name == data["to"]
    for disk, old_backing, new_backing in data["disks"]:
        subprocess.run(["qemu-img", "rebase", "-u", "-F", "qcow2", "-b",
                        new_backing if moved else old_backing, disk],
                       check=False, capture_output=True, timeout=120)
    want, other = (data["to"], data["from"]) if moved else (data["from"], data["to"])
    for vm in {str(Path(disk).parent) for disk, _, _ in data["disks"]}:
        path = Path(vm) / "vm.json"
        try:
            d = json.loads(read_owned(path))
        except (OSError, ValueError, UntrustedFile):
            continue
        if isinstance(d, dict) and d.get("linked_to") == other:
            d["linked_to"] = want
            write_durably(path, (json.dumps(d, indent=2) + "\n").encode())
    journal.unlink()
    return [f"{journal} ({'completed' if moved else 'undone'})"]


def _sweep_vm_dir(directory: Path) -> list[str]:
    removed = []
    if (directory / RENAMING).is_file():
        removed += _finish_rename(directory)
    marker = directory / PARTIAL
    if marker.is_file() and not owner_alive(read_owned(marker).decode()):
        if (directory / "vm.json").is_file():
            marker.unlink()  # the definition was written: only the marker was left
        else:
            shutil.rmtree(directory)
            return [str(directory)]
    for tmp in directory.glob(".*.*.tmp"):  # PendingWrite's ".<name>.<pid>.tmp"
        pid = tmp.name.rsplit(".", 2)[1]
        if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
            tmp.unlink()
            removed.append(str(tmp))
    return removed


def _sweep_export(scratch: Path) -> list[str]:
    owner = scratch / "owner"
    if owner.is_file() and owner_alive(read_owned(owner).decode()):
        return []
    removed = []
    target = scratch / "target"
    if target.is_file():
        part = read_owned(target).decode()
        if part.endswith(".part") and os.path.lexists(part):
            os.unlink(part)
            removed.append(part)
    shutil.rmtree(scratch)
    return [*removed, str(scratch)]


def export_scratch(root: Path, part: str) -> Path:
    """A scratch directory for one export, recording its owner and its ``.part`` file so
    that :func:`sweep` can remove both if this process dies."""
    import tempfile

    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=EXPORT_PREFIX, dir=root))
    try:
        (scratch / "owner").write_text(owner_token())
        (scratch / "target").write_text(part)
    except OSError as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise OperationFailed(in_words(e, str(root))) from e
    return scratch
