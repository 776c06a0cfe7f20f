"""Record a console session as an asciicast v2 file (https://docs.asciinema.org).

The first line is a JSON header, then one JSON array per event: ``[t, "o", text]`` for output
and ``[t, "r", "WxH"]`` for a resize, ``t`` in seconds since the start. Output is decoded
incrementally as UTF-8 (a character split across chunks is kept whole; invalid bytes become
U+FFFD).
"""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Callable
from pathlib import Path

from backends.paths import private_file

__all__ = ["AsciicastRecorder"]


class AsciicastRecorder:
    """Write an asciicast v2 recording.

    Args:
        path: the file to create (its directory is created if missing).
        width: terminal width at the start.
        height: terminal height at the start.
        title: recorded in the header when given.
        clock: monotonic seconds (injectable for tests).
        timestamp: the Unix start time for the header (default: now).
    """

    def __init__(
        self,
        path: str | Path,
        width: int,
        height: int,
        *,
        title: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        timestamp: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._clock = clock
        self._start = clock()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._file = private_file(self.path, binary=False, exclusive=False)
        header: dict = {
            "version": 2,
            "width": int(width),
            "height": int(height),
            "timestamp": int(time.time() if timestamp is None else timestamp),
        }
        if title:
            header["title"] = title
        self._write(header)

    @property
    def closed(self) -> bool:
        return self._file.closed

    def _elapsed(self) -> float:
        return round(max(0.0, self._clock() - self._start), 6)

    def _write(self, obj) -> None:
        self._file.write(json.dumps(obj, ensure_ascii=False) + "\n")
        now = time.monotonic()
        if now - getattr(self, "_flushed", 0.0) >= 1.0:  # readable while it records
            self._flushed = now
            self._file.flush()

    def output(self, data: bytes) -> None:
        """Record output from the guest."""
        if self._file.closed:
            return
        text = self._decoder.decode(data)
        if text:
            self._write([self._elapsed(), "o", text])

    def resize(self, width: int, height: int) -> None:
        """Record a terminal resize."""
        if not self._file.closed:
            self._write([self._elapsed(), "r", f"{int(width)}x{int(height)}"])

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        """Write what the decoder still holds and close the file (idempotent)."""
        if self._file.closed:
            return
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self._write([self._elapsed(), "o", tail])
        self._file.close()
