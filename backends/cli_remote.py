"""Adding a remote corral trusts to the ``lxc`` (LXD) or ``incus`` CLI too, with no
secret on any command line and without undoing corral's pin.

The CLI's own client certificate (``client.crt`` in its config directory, made like the
CLI makes it when there is none) is added to the server's trust store through corral's
connection, which the server already trusts and which is pinned to the certificate
corral checked. Then the CLI's files are written the way ``lxc remote add`` writes them:
the server certificate corral pinned as ``servercerts/<name>.crt`` and the remote's entry
in ``config.yml``. No token is issued, so none can be read from ``/proc/*/cmdline`` or
redeemed by anyone else; nothing is accepted on the CLI's behalf. A failure at any step
takes back what was done (the trust entry, the pin, the entry).
"""

from __future__ import annotations

import base64
import os
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import OperationFailed, Unreachable
from .paths import UntrustedFile, check_owned, read_owned
from .trust import ServerCert, ensure_client_certificate, pinned_session, write_private

_IMAGES = {"addr": "https://images.linuxcontainers.org", "protocol": "simplestreams",
           "public": True}


@dataclass(frozen=True, slots=True)
class CliConfig:
    """Where one CLI keeps its remotes."""

    tool: str
    """``lxc`` or ``incus``."""
    directory: Path

    @property
    def file(self) -> Path:
        return self.directory / "config.yml"

    def pin(self, name: str) -> Path:
        return self.directory / "servercerts" / f"{name}.crt"

    def client_pair(self, name: str) -> tuple[Path, Path]:
        """The certificate the CLI will present to remote ``name`` (Incus prefers a
        per-remote one), made when there is none."""
        if self.tool == "incus":
            crt = self.directory / "clientcerts" / f"{name}.crt"
            key = self.directory / "clientcerts" / f"{name}.key"
            if os.path.lexists(crt) and os.path.lexists(key):
                # the same owner checks as the CLI's client.crt: a pair another user
                # planted there would be trusted on the server as an administrator
                problem = check_owned(key, private=True) or check_owned(crt)
                if problem:
                    raise UntrustedFile(f"The {self.tool} CLI's client certificate was not "
                                        f"used (nothing was sent to the server): {problem}")
                return crt, key
        return ensure_client_certificate(self.directory)


def cli_config(tool: str, env: Mapping[str, str]) -> CliConfig:
    """The config directory the CLI uses (the same rules as :mod:`backends.remotes`)."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if tool == "lxc":
        if env.get("LXD_CONF"):
            return CliConfig(tool, Path(env["LXD_CONF"]))
        which = shutil.which("lxc", path=env.get("PATH")) or ""
        if which.startswith("/snap/"):
            return CliConfig(tool, home / "snap/lxd/common/config")
        return CliConfig(tool, home / ".config/lxc")
    if env.get("INCUS_CONF"):
        return CliConfig(tool, Path(env["INCUS_CONF"]))
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return CliConfig(tool, base / "incus")


def load(conf: CliConfig) -> dict[str, Any]:
    """The CLI's ``config.yml`` (what the CLI starts from when there is none).

    Raises:
        OperationFailed: it cannot be read or is not the CLI's format.
    """
    try:  # owner-checked: it is rewritten with what it holds
        text = read_owned(conf.file).decode(errors="replace")
    except FileNotFoundError:
        local: dict[str, Any] = {"addr": "unix://", "public": False}
        if conf.tool == "incus":
            local["protocol"] = "incus"
        return {"default-remote": "local", "remotes": {"images": dict(_IMAGES),
                                                       "local": local}, "aliases": {}}
    except OSError as e:
        raise OperationFailed(f"{conf.file} cannot be read: {e.strerror or e}.") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise OperationFailed(f"{conf.file} is not valid YAML; the {conf.tool} CLI was left "
                              f"as it is.") from None
    if not isinstance(data, dict) or not isinstance(data.get("remotes") or {}, dict):
        raise OperationFailed(f"{conf.file} is not a {conf.tool} config (no 'remotes:' "
                              f"mapping); it was left as it is.")
    data["remotes"] = data.get("remotes") or {}
    return data


def save(conf: CliConfig, data: dict[str, Any]) -> None:
    """Replace ``config.yml`` atomically, keeping its mode (0644 for a new one, as the CLI
    makes it)."""
    try:
        mode = os.stat(conf.file).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    text = yaml.safe_dump(data, default_flow_style=False, sort_keys=False)
    write_private(conf.file, text.encode(), mode=mode)


def entry(address: str, kind: str) -> dict[str, Any]:
    """A remote entry as ``lxc remote add`` / ``incus remote add`` writes it."""
    return {"addr": address, "auth_type": "tls", "project": "default",
            "protocol": "incus" if kind == "incus" else "lxd", "public": False}


def trust_client(cert: ServerCert, crt: Path, key: Path, client_pem: str, name: str,
                 timeout: float) -> str | None:
    """Blocking: add ``client_pem`` to the server's trust store through corral's pinned,
    trusted connection. Returns its fingerprint when it was added, None when the server
    trusted it already (then it is never revoked by corral).

    Raises:
        OperationFailed, Unreachable: in words.
    """
    import hashlib

    import requests

    der = ssl.PEM_cert_to_DER_cert(client_pem)
    fingerprint = hashlib.sha256(der).hexdigest()
    with pinned_session(cert, crt, key) as session:
        try:
            r = session.get(f"{cert.address}/1.0/certificates/{fingerprint}", timeout=timeout)
            if r.ok:
                return None
            r = session.post(f"{cert.address}/1.0/certificates",
                             json={"type": "client", "name": name,
                                   "certificate": base64.b64encode(der).decode()},
                             timeout=timeout)
        except requests.exceptions.RequestException as e:
            raise Unreachable(f"Talking to {cert.address} failed: {e}") from None
        if not r.ok:
            try:
                why = r.json().get("error") or r.reason
            except ValueError:
                why = r.reason
            raise OperationFailed(f"{cert.address} would not trust the CLI's certificate: "
                                  f"{why}.")
    return fingerprint


def revoke(cert: ServerCert, crt: Path, key: Path, fingerprint: str, timeout: float) -> None:
    """Blocking: take a certificate corral added back out of the trust store (best
    effort: a failure here must not hide the one that led to it)."""
    import requests

    with pinned_session(cert, crt, key) as session:
        try:
            session.delete(f"{cert.address}/1.0/certificates/{fingerprint}", timeout=timeout)
        except requests.exceptions.RequestException:
            pass
