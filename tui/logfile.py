"""corral's log file: ``$XDG_STATE_HOME/corral/corral.log`` (default
``~/.local/state/corral/``), rotated at 1 MiB with three old files kept.

Warnings and errors only, each with what was being done (the failing action and remote,
an unexpected error's traceback). Nothing secret reaches it: a filter blanks trust tokens,
passwords, secrets and private keys before a line is written, whatever logged them.

One record is one line starting with its date: newlines, carriage returns and every other
control character in a message are written as visible escapes (``\n``, ``\x1b``), so
text from a daemon, a guest or a file name cannot forge a line; a traceback follows on
lines indented by two spaces. The file is opened through
:func:`backends.paths.open_owned` (never through a link, only this user's regular file,
in a directory another user cannot change) and made 0600 on its descriptor; when that is
refused there is no log, and :data:`problem` says why.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
from pathlib import Path
from typing import IO, Any, Mapping

from backends.paths import UntrustedFile, open_owned

MAX_BYTES = 1024 * 1024
BACKUPS = 3

_SECRETS = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                re.S), "[private key removed]"),
    (re.compile(r"(?i)\b(password|passwd|secret|token|trust_token)(\"?\s*[:=]\s*\"?)"
                r"[^\s\",}]+"), r"\1\2[removed]"),
    (re.compile(r"\beyJ[A-Za-z0-9+/=_-]{20,}"), "[token removed]"),  # base64 JSON: a token
]


# controls, line separators, bidi overrides and isolates (which reorder a line as a
# terminal or editor shows it), and lone surrogates: a file name that is not UTF-8,
# decoded with surrogateescape, could not be written at all and its record was lost
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

problem: str | None = None
"""Why :func:`setup` wrote no log (the file or its directory was refused), in words."""


def redact(text: str) -> str:
    """``text`` with tokens, passwords, secrets and private keys blanked out."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def escape(text: str, keep_newlines: bool = False) -> str:
    """``text`` with control characters as visible escapes (``\n``, ``\x1b``, ``\u2028``,
    ``\u202e``, ``\udcff``)."""
    def one(m: re.Match[str]) -> str:
        c = m.group()
        if keep_newlines and c == "\n":
            return c
        return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
    return _CONTROL.sub(one, text)


class _Redacting(logging.Formatter):
    """One line per record, secrets blanked, control characters escaped; a traceback on
    indented lines below it."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(redact(record.getMessage()))
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        tail = []
        if record.exc_info:
            tail.append(self.formatException(record.exc_info))
        if record.stack_info:
            tail.append(self.formatStack(record.stack_info))
        if not tail:
            return line
        text = escape(redact("\n".join(tail)), keep_newlines=True)
        return line + "".join(f"\n  {t}" for t in text.split("\n"))


class _OwnedFileHandler(logging.handlers.RotatingFileHandler):
    """Opens the log through :func:`backends.paths.open_owned`; never writes to stderr
    (it would scribble over the screen)."""

    # typeshed says TextIOWrapper; open_owned is typed IO[Any] (text mode gives one)
    def _open(self) -> IO[Any]:  # type: ignore[override]
        return open_owned(self.baseFilename, "a")

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def log_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(state) / "corral" / "corral.log"


def setup(env: Mapping[str, str] | None = None) -> Path | None:
    """Send warnings and errors of every logger to the rotated log file; returns its path
    (None when it cannot be written, or is refused: corral runs on without a log, and
    :data:`problem` says why in words)."""
    global problem
    path = log_path(env)
    problem = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler = _OwnedFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS,
                                    encoding="utf-8")
    except (OSError, UntrustedFile) as e:
        # no log then, and nothing on stderr either (it would scribble over the screen)
        problem = (f"No log is written: {e.message}" if isinstance(e, UntrustedFile)
                   else f"No log is written: {path} cannot be opened ({e.strerror or e}).")
        logging.getLogger().addHandler(logging.NullHandler())
        return None
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Redacting("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    # urllib3 warns whenever a unix-socket pool of one is briefly exceeded: noise, not news
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    return path
