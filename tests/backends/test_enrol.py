"""Adding a remote from inside corral, against the lab's real LXD and Incus daemons with
real trust tokens (`lxc config trust add` / `incus config trust add`): what is stored, that
the stored remote connects, and that every refusal writes nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import stat
import subprocess
import tomllib

import pytest

from backends import get_backend
from backends.enrol import add_to_cli, enrol
from backends.errors import AuthError, InvalidInput, Unreachable
from backends.remote_store import RemoteStore
from backends.trust import parse_token


def _never(_cert):
    raise AssertionError("a token needs no acceptance")


async def _no(_cert):
    return False


async def _yes(_cert):
    return True


def _nothing_about_remotes(store: RemoteStore) -> bool:
    """No entry stored and no server certificate pinned."""
    return not store.load()[0] and not (store.certs.exists() and any(store.certs.iterdir()))


async def _connects(remote) -> list[str]:
    backend = get_backend(remote, timeout=10)
    try:
        await backend.connect()
        return [i.name for i in await backend.list_instances()]
    finally:
        await backend.close()


@pytest.mark.parametrize("which", ["lxd1", "incus1"])
async def test_token_adds_a_trusted_pinned_remote(lab, tmp_path, which, unique):
    daemon = getattr(lab, which)
    store = RemoteStore(tmp_path / "corral")
    name = unique()[-20:].strip("-")
    address = "" if which == "lxd1" else daemon.https_address  # the token's addresses
    done = await enrol(store, name, address, daemon.trust_token(f"t-{name}"),
                       accept=_never, taken=set())
    assert done.kind == ("incus" if which == "incus1" else "lxd")
    # pinned: the stored certificate is the one the daemon serves
    pem = (store.certs / f"{name}.crt").read_text()
    assert hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest() == daemon.fingerprint
    assert stat.S_IMODE(os.stat(store.directory / "client.key").st_mode) == 0o600
    entries = tomllib.loads(store.path.read_text())["remote"]
    assert [e["name"] for e in entries] == [name]
    assert entries[0]["kind"] == done.kind
    assert isinstance(await _connects(done.remote), list)
    # The daemon lists corral's certificate among the trusted ones.
    trusted = daemon.cli("config", "trust", "list", "--format", "csv").stdout
    assert f"t-{name}" in trusted  # the name the token was issued for
    store.remove(name)
    assert not store.path.read_text().count("[[remote]]")
    assert not (store.certs / f"{name}.crt").exists()


async def test_refusals_write_nothing(lab, tmp_path, unique):
    store = RemoteStore(tmp_path / "corral")
    # a token of lxd2 presented to lxd1: fingerprint mismatch, nothing sent
    with pytest.raises(AuthError, match="not the one the token names"):
        await enrol(store, "x1", lab.lxd1.https_address, lab.lxd2.trust_token(unique()),
                    accept=_never, taken=set())
    assert _nothing_about_remotes(store)
    # a token used twice: refused by the daemon
    token = lab.lxd1.trust_token(unique())
    first = await enrol(store, "once", "", token, accept=_never, taken=set())
    with pytest.raises(AuthError, match="refused the trust token|did not accept"):
        await enrol(RemoteStore(tmp_path / "other"), "twice", "", token, accept=_never,
                    taken=set())
    assert _nothing_about_remotes(RemoteStore(tmp_path / "other"))
    store.remove(first.remote.name)
    # Incus: a wrong secret with the right fingerprint
    good = lab.incus1.trust_token(unique())
    data = json.loads(base64.b64decode(parse_token(good).raw + "=="))
    data["secret"] = "0" * len(data["secret"])
    bad = base64.b64encode(json.dumps(data).encode()).decode()
    with pytest.raises(AuthError):
        await enrol(RemoteStore(tmp_path / "inc"), "bad", "", bad, accept=_never, taken=set())
    assert _nothing_about_remotes(RemoteStore(tmp_path / "inc"))
    # unreachable address
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable):
        await enrol(store, "gone", f"127.0.0.1:{port}", "", accept=_yes, taken=set())
    # not a token at all; a taken name; a rejected fingerprint
    with pytest.raises(InvalidInput, match="not a trust token"):
        await enrol(store, "junk", lab.lxd1.https_address, "hello", accept=_never, taken=set())
    with pytest.raises(InvalidInput, match="exists already"):
        await enrol(store, "lab2", lab.lxd1.https_address, "", accept=_yes, taken={"lab2"})
    with pytest.raises(InvalidInput, match="not accepted"):
        await enrol(store, "tofu", lab.lxd2.https_address, "", accept=_no, taken=set())
    # TOFU accepted but the daemon does not trust this client: words, nothing stored
    with pytest.raises(AuthError, match="does not trust corral's client certificate"):
        await enrol(RemoteStore(tmp_path / "tofu"), "tofu", lab.lxd2.https_address, "",
                    accept=_yes, taken=set())
    assert _nothing_about_remotes(store)
    assert _nothing_about_remotes(RemoteStore(tmp_path / "tofu"))


async def test_tofu_with_an_already_trusted_certificate(lab, tmp_path, unique):
    """The fingerprint accepted by the user; corral's certificate trusted on the server
    by hand (`lxc config trust add client.crt`)."""
    from backends.trust import ensure_client_certificate

    store = RemoteStore(tmp_path / "corral")
    crt, _key = ensure_client_certificate(store.directory)
    lab.lxd2.cli("config", "trust", "add", str(crt))
    seen = []

    async def accept(cert):
        seen.append(cert.fingerprint)
        return True

    done = await enrol(store, "byhand", lab.lxd2.https_address, "", accept=accept, taken=set())
    assert seen == [lab.lxd2.fingerprint]
    assert isinstance(await _connects(done.remote), list)


@pytest.mark.parametrize("which", ["lxd1", "incus1"])
async def test_also_added_to_the_cli(lab, tmp_path, which, unique):
    daemon = getattr(lab, which)
    store = RemoteStore(tmp_path / "corral")
    name = "cli" + unique()[-8:]
    done = await enrol(store, name, daemon.https_address, daemon.trust_token(unique()),
                       accept=_never, taken=set())
    env = lab.env()
    conf_var = "INCUS_CONF" if which == "incus1" else "LXD_CONF"
    env[conf_var] = str(tmp_path / "cliconf")  # never the lab's shared CLI config
    said = await add_to_cli(done, store, env=env)
    assert name in said
    tool = "incus" if which == "incus1" else "lxc"
    listed = subprocess.run([tool, "list", f"{name}:", "--format", "csv", "-c", "n"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    pinned = (tmp_path / "cliconf" / "servercerts" / f"{name}.crt").read_text()
    assert hashlib.sha256(ssl.PEM_cert_to_DER_cert(pinned)).hexdigest() == daemon.fingerprint
