"""Which libvirt remotes corral finds and how it opens them: corral's own ``[[remote]] kind =
"libvirt"``, the ``uri_aliases`` of ``libvirt.conf``, the URI rules that keep every prompt
away (``backends/libvirt/uri.py``), and ``corral --list-remotes`` with and without the
libvirt binding (the real CLI in a subprocess, against the private libvirt)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

import lab_libvirt
from backends import remotes
from backends.libvirt import ssh_tunnel
from backends.libvirt import uri as uris

ROOT = Path(__file__).resolve().parents[2]


def _query(uri: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(uri).query))


def test_ssh_without_known_hosts_runs_ssh_in_batch_mode():
    out = uris.effective("qemu+ssh://root@server/system?keyfile=/k")
    assert out.startswith("qemu+ssh://root@server/system?")
    assert _query(out) == {"keyfile": "/k", "no_tty": "1"}


def test_ssh_with_known_hosts_runs_the_ssh_program_and_the_master_pins_that_file(
        monkeypatch):
    """libvirt's ssh transport ignores known_hosts=: corral's master applies it (never
    libvirt's libssh client, which stalled and crashed on large replies)."""
    monkeypatch.setenv("HOME", "/home/ann")
    uri = ("qemu+ssh://ann@server:2222/system?keyfile=~/.ssh/id"
           "&known_hosts=~/.ssh/known_hosts&no_verify=0")
    out = uris.effective(uri)
    assert out.startswith("qemu+ssh://ann@server:2222/system?")
    assert _query(out) == {"keyfile": "/home/ann/.ssh/id", "no_verify": "0", "no_tty": "1"}
    dest = ssh_tunnel.destination(uri)
    assert dest.known_hosts == "/home/ann/.ssh/known_hosts" and dest.strict
    opts = dest.options()
    for pair in (["-o", "UserKnownHostsFile=/home/ann/.ssh/known_hosts"],
                 ["-o", "StrictHostKeyChecking=yes"],
                 ["-o", "GlobalKnownHostsFile=/dev/null"], ["-o", "BatchMode=yes"],
                 ["-l", "ann"], ["-p", "2222"], ["-i", "/home/ann/.ssh/id"]):
        assert any(opts[i:i + 2] == pair for i in range(len(opts))), (pair, opts)


@pytest.mark.parametrize("transport", ["libssh", "libssh2"])
def test_libvirts_in_process_ssh_clients_are_never_used(transport):
    """A URI naming libssh is opened with the ssh program; asking to accept any new key
    (``auto``) still pins it, ``ignore`` is the ssh program's ``no_verify=1``."""
    out = uris.effective(f"qemu+{transport}://s/system?known_hosts=/kh&known_hosts_verify=auto")
    assert out == "qemu+ssh://s/system?no_tty=1"
    dest = ssh_tunnel.destination(f"qemu+{transport}://s/system?known_hosts=/kh"
                                  "&known_hosts_verify=auto")
    assert dest.known_hosts == "/kh" and dest.strict
    loose = f"qemu+{transport}://s/system?known_hosts_verify=ignore"
    assert _query(uris.effective(loose)) == {"no_verify": "1", "no_tty": "1"}
    assert not ssh_tunnel.destination(loose).strict
    assert "StrictHostKeyChecking=no" in ssh_tunnel.destination(loose).options()


def test_local_uris_are_left_alone():
    assert uris.effective("qemu:///system") == "qemu:///system"
    assert not uris.is_remote("qemu+unix:///system?socket=/s")
    assert uris.is_remote("qemu+ssh://h/system")


def test_corral_config_libvirt_remote_and_a_bad_one(tmp_path):
    found = remotes.discover({"HOME": str(tmp_path)}, extra=[
        {"name": "srv", "kind": "libvirt", "uri": "qemu+ssh://root@srv/system"},
        {"name": "nouri", "kind": "libvirt"},
        {"name": "odd", "kind": "xen-ish", "address": "x"},
    ], extra_source="config.toml")
    by_name = {r.name: r for r in found.remotes}
    assert by_name["srv"].kind == "libvirt" and by_name["srv"].problem is None
    assert by_name["srv"].address == "qemu+ssh://root@srv/system"
    assert "nouri" not in by_name and "odd" not in by_name
    problems = [str(p) for p in found.problems]
    assert any("'nouri'" in p and "needs a uri" in p for p in problems), problems
    assert any("'odd'" in p and "lxd, incus or libvirt" in p for p in problems), problems


def test_uri_aliases_of_libvirt_conf_are_remotes(tmp_path):
    conf = tmp_path / ".config" / "libvirt" / "libvirt.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('# aliases\nuri_aliases = [\n  "hail=qemu+ssh://root@hail/system",\n'
                    "  'sleet=qemu+ssh://root@sleet/system',  # a comment\n"
                    '  "broken",\n]\nuri_default = "qemu:///system"\n')
    found = remotes.discover({"HOME": str(tmp_path)})
    by_name = {r.name: r for r in found.remotes if r.kind == "libvirt"}
    assert {n: r.address for n, r in by_name.items()} == {
        "hail": "qemu+ssh://root@hail/system", "sleet": "qemu+ssh://root@sleet/system"}
    assert by_name["hail"].source == str(conf)
    assert any("'broken'" in str(p) for p in found.problems)
    assert str(conf) in found.looked_in


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


async def test_the_system_libvirt_is_a_remote_when_its_socket_is_there(vlab, tmp_path,
                                                                        monkeypatch):
    from backends import get_backend

    monkeypatch.setattr(remotes, "LIBVIRT_SYSTEM_SOCKETS",
                        (str(tmp_path / "virtqemud-sock"), str(vlab.socket)))
    found = {r.name: r for r in remotes.discover({"HOME": str(tmp_path)}).remotes}
    system = found["libvirt"]
    assert system.kind == "libvirt" and system.problem is None
    assert system.address == f"qemu+unix:///system?socket={vlab.socket}"
    backend = get_backend(system)
    try:
        assert (await backend.connect()).server == "libvirt"
    finally:
        await backend.close()

    monkeypatch.setattr(remotes, "LIBVIRT_SYSTEM_SOCKETS", (str(tmp_path / "none-sock"),))
    assert "libvirt" not in {r.name for r in remotes.discover({"HOME": str(tmp_path)}).remotes}


def _list_remotes(env: dict[str, str], *, block_binding: bool) -> subprocess.CompletedProcess:
    prelude = "import sys; sys.modules['libvirt'] = None; " if block_binding else "import sys; "
    code = prelude + "from tui.cli import main; sys.exit(main(['--list-remotes']))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120)


@pytest.mark.parametrize("block_binding", [False, True])
def test_list_remotes_shows_libvirt_or_says_why_it_cannot(vlab, tmp_path, block_binding):
    config = Path(os.environ["CORRAL_CONFIG_FILE"])
    config.write_text('[qemu]\nenabled = false\n[lxc]\nenabled = false\n'
                      f'[[remote]]\nname = "virt"\nkind = "libvirt"\nuri = "{vlab.unix_uri}"\n')
    done = _list_remotes(dict(os.environ), block_binding=block_binding)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("virt ")), "")
    if block_binding:
        assert "error" in line and "libvirt Python binding is not installed" in line, done
        assert "corral[libvirt]" in line
    else:
        assert "connected" in line and "libvirt 9." in line, (done.stdout, done.stderr)
