"""``qemu-img`` as asyncio subprocesses: every call is killed when the awaiting task is
cancelled, so none is left writing a disk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import AsyncIterator, Callable

from ..errors import InvalidInput, OperationFailed


def _failed(what: str, err: bytes) -> OperationFailed:
    text = err.decode(errors="replace").strip()
    if "No space left on device" in text:
        return OperationFailed(f"{what} failed: the disk is full (free some space and try "
                               f"again). qemu-img said: {text}")
    return OperationFailed(f"{what} failed: {text}")


@contextlib.asynccontextmanager
async def _killed_when_cancelled(proc: asyncio.subprocess.Process) -> AsyncIterator[None]:
    try:
        yield
    except asyncio.CancelledError:
        if proc.returncode is None:  # cancelled: do not leave it writing a disk
            proc.kill()
            await asyncio.shield(proc.wait())
        raise


async def qemu_img(*args: str, pass_fds: tuple[int, ...] = ()) -> str:
    """Run ``qemu-img args…``; its standard output. ``pass_fds``: descriptors it
    inherits (files named as ``/dev/fd/N``).

    Raises:
        OperationFailed: it failed (its error output in the message).
    """
    proc = await asyncio.create_subprocess_exec(
        "qemu-img", *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, pass_fds=pass_fds)
    async with _killed_when_cancelled(proc):
        out, err = await proc.communicate()
    if proc.returncode != 0:
        raise _failed(f"qemu-img {args[0]}", err)
    return out.decode()


async def info(path: str, *, shared: bool = True, fmt: str = "qcow2") -> dict:
    """``qemu-img info`` of ``path`` (one of corral's own disks: format ``fmt``, never
    probed) as JSON; ``shared`` (``-U``) also reads a disk a running QEMU holds locked.
    Images from elsewhere go through :mod:`.image_gate` instead.

    Raises:
        OperationFailed: qemu-img failed.  ValueError: its output is not JSON.
    """
    return json.loads(await qemu_img("info", *(["-U"] if shared else []), "--output=json",
                                     "-f", fmt, path))


async def image_info(path: str) -> dict:
    """:func:`info` of one of corral's own disks (qcow2), errors in words.

    Raises:
        InvalidInput: it is not a qcow2 image QEMU can read.
    """
    try:
        return await info(path)
    except OperationFailed as e:
        raise InvalidInput(f"{path} is not a disk image QEMU can read: {e.message}") from e


async def convert(src: str, dst: str, label: str, say: Callable[[str], None], *,
                  src_format: str = "qcow2", pass_fds: tuple[int, ...] = ()) -> None:
    """``qemu-img convert`` from ``src`` (format ``src_format``, never probed) to a new
    qcow2 (flattens backing files, drops internal snapshots), reporting ``label N%``."""
    proc = await asyncio.create_subprocess_exec(
        "qemu-img", "convert", "-p", "-f", src_format, "-O", "qcow2", src, dst,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, pass_fds=pass_fds)

    async def pump() -> None:
        assert proc.stdout is not None
        buf = b""
        last = -1
        while chunk := await proc.stdout.read(512):
            *lines, buf = re.split(rb"[\r\n]", buf + chunk)
            for line in lines:
                m = re.search(rb"\(([\d.]+)/100%\)", line)
                if m and int(float(m[1])) != last:
                    last = int(float(m[1]))
                    say(f"{label} {last}%")

    async with _killed_when_cancelled(proc):
        assert proc.stderr is not None
        _, err = await asyncio.gather(pump(), proc.stderr.read())
        await proc.wait()
    if proc.returncode != 0:
        raise _failed(f"qemu-img convert of {src}", err)
