"""corral's log file: ``$XDG_STATE_HOME/corral/corral.log`` (default
``~/.local/state/corral/``), rotated at 1 MiB with three old files kept.

Warnings and errors only, each with what was being done (the failing action and remote,
an unexpected error's traceback). Nothing secret reaches it: a filter blanks trust tokens,
passwords, secrets and private keys before a line is written, whatever logged them.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
from pathlib import Path
from typing import Mapping

MAX_BYTES = 1024 * 1024
BACKUPS = 3

_SECRETS = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                re.S), "[private key removed]"),
    (re.compile(r"(?i)\b(password|passwd|secret|token|trust_token)(\"?\s*[:=]\s*\"?)"
                r"[^\s\",}]+"), r"\1\2[removed]"),
    (re.compile(r"\beyJ[A-Za-z0-9+/=_-]{20,}"), "[token removed]"),  # base64 JSON: a token
]


def redact(text: str) -> str:
    """``text`` with tokens, passwords, secrets and private keys blanked out."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class _Redacting(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def log_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(state) / "corral" / "corral.log"


def setup(env: Mapping[str, str] | None = None) -> Path | None:
    """Send warnings and errors of every logger to the rotated log file; returns its path
    (None when it cannot be written: corral runs on without a log)."""
    path = log_path(env)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES,
                                                       backupCount=BACKUPS, encoding="utf-8")
        os.chmod(path, 0o600)
    except OSError:
        # no log then, and nothing on stderr either (it would scribble over the screen)
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
