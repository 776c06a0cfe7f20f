"""Adding a remote to the lxc/incus CLI puts no secret on any command line and never
accepts a certificate on the CLI's behalf, against the lab's real LXD and Incus daemons:
every subprocess's argv is recorded, the CLI then works with its own client certificate
and corral's pin, no token is left pending, and a failure takes the trust back."""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
import subprocess

import pytest
import yaml

from backends.enrol import add_to_cli, enrol
from backends.errors import OperationFailed
from backends.remote_store import RemoteStore


def _never(_cert):
    raise AssertionError("a token needs no acceptance")


def fingerprint(pem: str) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def trusted(daemon) -> set[str]:
    out = daemon.cli("query", "/1.0/certificates?recursion=1").stdout
    return {c["fingerprint"] for c in json.loads(out)}


def pending_tokens(daemon) -> str:
    return daemon.cli("config", "trust", "list-tokens", "--format", "csv").stdout


@pytest.fixture
def argv(monkeypatch):
    """Every command line a subprocess is started with, from here on."""
    seen: list[list[str]] = []
    real_exec = asyncio.create_subprocess_exec
    real_popen = subprocess.Popen.__init__

    async def exec_(program, *args, **kw):
        seen.append([str(program), *map(str, args)])
        return await real_exec(program, *args, **kw)

    def popen(self, args, *rest, **kw):
        seen.append([str(a) for a in ([args] if isinstance(args, str) else args)])
        real_popen(self, args, *rest, **kw)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", exec_)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    return seen


async def _enrolled(daemon, tmp_path, unique):
    store = RemoteStore(tmp_path / "corral")
    name = "cli" + unique()[-8:]
    done = await enrol(store, name, daemon.https_address, daemon.trust_token(unique()),
                       accept=_never, taken=set())
    return store, name, done


@pytest.mark.parametrize("which", ["lxd1", "incus1"])
async def test_cli_remote_added_with_no_secret_on_any_command_line(lab, tmp_path, which,
                                                                   unique, argv):
    daemon = getattr(lab, which)
    tool = "incus" if which == "incus1" else "lxc"
    store, name, done = await _enrolled(daemon, tmp_path, unique)
    env = lab.env()
    conf = tmp_path / "cliconf"
    env["INCUS_CONF" if which == "incus1" else "LXD_CONF"] = str(conf)
    # the user's CLI config already holds a remote and an alias: both stay
    conf.mkdir()
    (conf / "config.yml").write_text(
        "default-remote: local\nremotes:\n  local:\n    addr: unix://\n    public: false\n"
        "  other:\n    addr: https://192.0.2.1:8443\n    auth_type: tls\n"
        "    protocol: lxd\n    public: false\naliases:\n  ll: list -c n\n")
    tokens_before = pending_tokens(daemon)
    argv.clear()

    said = await add_to_cli(done, store, env=env)

    assert name in said
    flat = [a for cmd in argv for a in cmd]
    assert not any(a.startswith(("--password", "--token", "--accept-certificate"))
                   for a in flat), argv
    assert all(cmd[:3] != [tool, "remote", "add"] for cmd in argv), argv
    assert pending_tokens(daemon) == tokens_before  # no token was issued for the CLI
    # the CLI works, with corral's pin and its own (now trusted) client certificate
    listed = subprocess.run([tool, "list", f"{name}:", "--format", "csv", "-c", "n"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert fingerprint((conf / "servercerts" / f"{name}.crt").read_text()) == \
        daemon.fingerprint
    assert fingerprint((conf / "client.crt").read_text()) in trusted(daemon)
    data = yaml.safe_load((conf / "config.yml").read_text())
    assert data["remotes"][name] == {
        "addr": done.cert.address, "auth_type": "tls", "project": "default",
        "protocol": "incus" if which == "incus1" else "lxd", "public": False}
    assert "other" in data["remotes"] and data["aliases"] == {"ll": "list -c n"}
    # the CLI reads the file corral wrote as its own (remote list shows it)
    shown = subprocess.run([tool, "remote", "list", "--format", "csv"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and name in shown.stdout, shown.stderr
    # a second time: the name is taken in the CLI, nothing changes
    with pytest.raises(OperationFailed, match="has a remote named"):
        await add_to_cli(done, store, env=env)


async def test_a_failure_after_trusting_takes_everything_back(lab, tmp_path, unique):
    daemon = lab.lxd1
    store, name, done = await _enrolled(daemon, tmp_path, unique)
    env = lab.env()
    conf = tmp_path / "cliconf"
    env["LXD_CONF"] = str(conf)
    # the pin cannot be written (a directory is in its place): the CLI's certificate
    # was trusted already and must be revoked again
    (conf / "servercerts" / f"{name}.crt").mkdir(parents=True)
    with pytest.raises(OperationFailed, match="could not be written"):
        await add_to_cli(done, store, env=env)
    cli_fp = fingerprint((conf / "client.crt").read_text())
    assert cli_fp not in trusted(daemon)
    assert not (conf / "config.yml").exists()
    # an unusable config.yml: refused in words before anything reaches the server
    (conf / "servercerts" / f"{name}.crt").rmdir()
    (conf / "config.yml").write_text("- not\n- a mapping\n")
    with pytest.raises(OperationFailed, match="is not a lxc config"):
        await add_to_cli(done, store, env=env)
    assert cli_fp not in trusted(daemon)
    assert not (conf / "servercerts" / f"{name}.crt").exists()
