"""What a local tool (``qemu-system-x86_64 --version``, ``lxc-ls --version``) says its
version is: asked once per process for each binary, and again only when the binary changed
(its path, size and modification time: an upgrade).

The first listing of a local remote asks in its thread, before the UI starts; the backend's
connection then finds the answer here and starts no process (and no thread waiting for
one) on the event loop. Nothing here imports a backend.
"""

from __future__ import annotations

import asyncio
import os
import subprocess

_KNOWN: dict[tuple[str, int, int, tuple[str, ...]], str] = {}


def _key(binary: str, args: tuple[str, ...]) -> tuple[str, int, int, tuple[str, ...]]:
    st = os.stat(binary)
    return os.path.realpath(binary), st.st_size, st.st_mtime_ns, args


def ask(binary: str, *args: str, timeout: float = 10.0) -> str:
    """What ``binary args`` prints (blocking; a thread's call).

    Raises:
        OSError: no such binary.
        subprocess.SubprocessError: it failed or took longer than ``timeout``.
    """
    key = _key(binary, args)
    out = _KNOWN.get(key)
    if out is None:
        out = subprocess.run([binary, *args], stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=timeout, check=True).stdout
        _KNOWN[key] = out
    return out


async def ask_async(binary: str, *args: str, timeout: float = 10.0) -> str:
    """What ``binary args`` prints: known already (asked by the first listing), or asked
    now in an asyncio subprocess (killed when it takes longer than ``timeout`` or the
    caller is cancelled).

    Raises:
        OSError: no such binary.
        TimeoutError: it did not finish within ``timeout`` seconds.
    """
    key = _key(binary, args)
    out = _KNOWN.get(key)
    if out is None:
        proc = await asyncio.create_subprocess_exec(
            binary, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        try:
            data, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except BaseException:  # the time-out, or the caller gave up
            if proc.returncode is None:
                proc.kill()
                await asyncio.shield(proc.wait())
            raise
        out = data.decode(errors="replace")
        if proc.returncode == 0:
            _KNOWN[key] = out
    return out
