"""The remotes corral added itself: ``remotes.toml`` beside corral's ``config.toml``, with
the pinned server certificates in ``servercerts/`` and corral's client certificate.

corral owns this file and rewrites it whole (atomically); the user's ``config.toml`` and
the ``lxc``/``incus`` CLI files are never rewritten. Its ``[[remote]]`` tables have the
same keys as ``config.toml``'s, so an entry can be moved there by hand.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInput
from .models import Remote
from .paths import UntrustedFile, read_owned
from .trust import write_private


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class RemoteStore:
    """``directory`` is corral's config directory."""

    directory: Path

    @property
    def path(self) -> Path:
        return self.directory / "remotes.toml"

    @property
    def certs(self) -> Path:
        return self.directory / "servercerts"

    def load(self) -> tuple[list[dict[str, Any]], str | None]:
        """The stored entries, and a problem in words when the file is unreadable or not
        this user's own (:func:`~backends.paths.read_owned`: a planted file is never used)."""
        try:
            data = tomllib.loads(read_owned(self.path).decode())
        except FileNotFoundError:
            return [], None
        except UntrustedFile as e:
            return [], f"{e.message} Remotes added in corral are missing."
        except (OSError, ValueError) as e:  # TOMLDecodeError, UnicodeDecodeError
            return [], f"{self.path}: cannot be used ({e}); remotes added in corral are missing"
        entries = data.get("remote") or []
        return [e for e in entries if isinstance(e, dict)], None

    def owns(self, remote: Remote) -> bool:
        """``remote`` was added by corral (and can be removed by it)."""
        return remote.source == str(self.path)

    def add(self, entry: dict[str, str], server_pem: str) -> None:
        """Store one remote and its pinned certificate.

        Raises:
            InvalidInput: a remote of that name is stored already.
        """
        entries, problem = self.load()
        if problem:
            raise InvalidInput(problem)
        if any(e.get("name") == entry["name"] for e in entries):
            raise InvalidInput(f"corral already has a remote named '{entry['name']}'.")
        cert = self.certs / f"{entry['name']}.crt"
        write_private(cert, server_pem.encode(), mode=0o644)
        try:
            self._write([*entries, {**entry, "server_cert": str(cert)}])
        except BaseException:
            cert.unlink(missing_ok=True)
            raise

    def remove(self, name: str) -> None:
        """Forget a remote corral added, and its pinned certificate."""
        entries, problem = self.load()
        if problem:
            raise InvalidInput(problem)
        kept = [e for e in entries if e.get("name") != name]
        if len(kept) == len(entries):
            raise InvalidInput(f"'{name}' was not added in corral; remove it where it was "
                               f"configured (`lxc remote remove {name}` or config.toml).")
        self._write(kept)
        (self.certs / f"{name}.crt").unlink(missing_ok=True)

    def _write(self, entries: list[dict[str, Any]]) -> None:
        lines = ["# Remotes added in corral (+ in the remotes pane). corral rewrites this",
                 "# file; move an entry to config.toml to keep it by hand.", ""]
        for e in entries:
            lines.append("[[remote]]")
            for key, value in e.items():
                if isinstance(value, bool):
                    lines.append(f"{key} = {'true' if value else 'false'}")
                else:
                    lines.append(f"{key} = {_toml_string(str(value))}")
            lines.append("")
        write_private(self.path, "\n".join(lines).encode(), mode=0o600)
