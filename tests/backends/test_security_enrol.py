"""Adding a remote to the incus/lxc CLI sends nothing to the server before the CLI's
files have passed corral's owner checks: a client certificate another user planted in the
CLI's directory (under ``sudo -E`` it is the invoking user's) would otherwise be trusted
on the server as an administrator, for the time until a later step failed and took it
back, or for good. Issue 25, item 10, one step aside: Incus's per-remote
``clientcerts/<name>.crt``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends import enrol
from backends.errors import OperationFailed
from backends.models import Remote
from backends.trust import ServerCert

NOBODY = 65534
pytestmark = pytest.mark.root  # planting another user's file needs root (tests/tiers.py)


def _enrolled(tmp_path: Path) -> enrol.Enrolled:
    remote = Remote(name="lab", kind="incus", address="https://127.0.0.1:1",
                    client_cert=str(tmp_path / "c.crt"), client_key=str(tmp_path / "c.key"))
    return enrol.Enrolled(remote, ServerCert("https://127.0.0.1:1", "PEM", "00"), "incus")


def _cli(tmp_path: Path) -> dict[str, str]:
    """An ``incus`` program on PATH (never run: nothing gets that far) and its config."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "incus"
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "INCUS_CONF": str(tmp_path / "conf")}


def _plant(path: Path, text: str, mode: int) -> None:
    path.write_text(text)
    path.chmod(mode)
    os.chown(path, NOBODY, NOBODY)


@pytest.mark.parametrize("planted", ["per-remote pair", "whole directory"])
async def test_a_planted_cli_certificate_is_never_sent_to_the_server(tmp_path, monkeypatch,
                                                                      planted):
    sent = []
    monkeypatch.setattr(enrol, "trust_client", lambda *a, **k: sent.append(a) or "fp")
    env = _cli(tmp_path)
    conf = tmp_path / "conf"
    certs = conf / "clientcerts"
    certs.mkdir(parents=True, mode=0o700)
    _plant(certs / "lab.crt", "-----BEGIN CERTIFICATE-----\nplanted\n", 0o644)
    _plant(certs / "lab.key", "-----BEGIN EC PRIVATE KEY-----\nplanted\n", 0o600)
    if planted == "whole directory":
        for path in (certs, conf):
            os.chown(path, NOBODY, NOBODY)
    with pytest.raises(OperationFailed, match="belongs to"):
        await enrol.add_to_cli(_enrolled(tmp_path), None, env=env, timeout=1)
    assert sent == []
    assert not (conf / "config.yml").exists() and not (conf / "servercerts").exists()
