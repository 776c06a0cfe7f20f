"""What a container archive (written by ``export_instance``) may hold, checked before
anything is unpacked: only ``config``, ``rootfs/`` and ``snaps/``; no absolute paths, no
``..`` and no members beyond a symbolic link of the archive."""

from __future__ import annotations

import gzip
import lzma
import tarfile
import zlib

from ..work import Worker


def archive_problem(name: str, linkname: str | None, links: set[str]) -> str | None:
    """Why a member of a container archive is refused (None: acceptable)."""
    for path in (name,) + ((linkname,) if linkname is not None else ()):
        parts = path.split("/")
        if path.startswith("/") or ".." in parts:
            return f"'{path}' leaves the container's directory"
        if parts[0] not in ("config", "rootfs", "snaps"):
            return f"'{path}' is not part of a container (config, rootfs/, snaps/)"
    parts = name.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            return f"'{name}' lies beyond a symbolic link of the archive"
    return None


def check_container_archive(worker: Worker, path: str) -> dict[str, bytes]:
    """Read a container archive once (in a thread: :func:`backends.work.in_thread`),
    checking every member; returns the top-level ``config`` and the snapshots' configs
    (``snaps/<x>/config``) by name.

    Raises:
        ValueError: in words, why the archive is refused.
    """
    configs: dict[str, bytes] = {}
    links: set[str] = set()
    has_rootfs = False
    seen = 0
    try:
        with tarfile.open(path, "r|*") as tar:
            for member in tar:
                worker.check()
                seen += member.size
                worker.report(f"checking the archive… {seen >> 20} MiB")
                name = member.name
                while name.startswith("./"):
                    name = name[2:]
                name = name.rstrip("/")
                if name in ("", "."):
                    continue
                linkname = member.linkname if member.islnk() else None
                if linkname is not None:
                    while linkname.startswith("./"):
                        linkname = linkname[2:]
                problem = archive_problem(name, linkname, links)
                if problem:
                    raise ValueError(problem)
                if member.issym():
                    links.add(name)
                if name == "rootfs" and member.isdir():
                    has_rootfs = True
                parts = name.split("/")
                if name == "config" or (len(parts) == 3 and parts[0] == "snaps"
                                        and parts[2] == "config"):
                    if not member.isreg() or member.size > 1 << 20:
                        raise ValueError(f"its {name} is not a plain config file")
                    f = tar.extractfile(member)
                    assert f is not None
                    configs[name] = f.read()
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
        raise ValueError(f"it is damaged or not a tar archive ({e or type(e).__name__})") \
            from e
    if "config" not in configs or not has_rootfs:
        raise ValueError("it has no config and rootfs/ at its top")
    return configs
