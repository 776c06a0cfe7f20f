"""Files corral reads from its own directories are used only when they are this user's:
planted ones (another user's, links, FIFOs, in a directory others can change) are refused
in words and left as they are. Issue 25, item 10.

Files "of another user" are made by chown, so these tests need root (the project's hosts
and CI are root); ``test_the_checks_hold_for_a_user_who_is_not_root`` runs the same
checks as ``nobody`` in a subprocess.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from backends.errors import InvalidInput
from backends.paths import UntrustedFile, check_owned, open_owned, read_owned
from backends.qemu.definition import VMDefinition
from backends.remote_store import RemoteStore
from backends.remotes import discover
from backends.trust import ensure_client_certificate, write_private
from tui.config import load_config

NOBODY = 65534
root_only = pytest.mark.root  # planting another user's file needs root (tests/tiers.py)


def snapshot(path: Path) -> tuple:
    """What must not change about a planted file: its bytes, mode and owner."""
    st = os.lstat(path)
    data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
    return data, st.st_mode, st.st_uid, st.st_gid


def test_the_helper_refuses_links_fifos_foreign_and_writable_files(tmp_path):
    own = tmp_path / "own.toml"
    own.write_text("ok")
    assert read_owned(own) == b"ok"
    link = tmp_path / "link.toml"
    link.symlink_to(own)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    loose = tmp_path / "loose.toml"
    loose.write_text("x")
    loose.chmod(0o666)
    key = tmp_path / "client.key"
    key.write_text("k")
    key.chmod(0o644)
    for path, words in ((link, "is a symbolic link"), (fifo, "is a FIFO"),
                        (loose, "can be changed by other users (mode 0666)"),
                        (tmp_path, "is a directory")):
        with pytest.raises(UntrustedFile, match=re.escape(words)) as e:
            read_owned(path)
        assert str(path) in e.value.message
    with pytest.raises(UntrustedFile, match=r"can be read by other users \(mode 0644\)"):
        read_owned(key, private=True)
    with pytest.raises(FileNotFoundError):
        read_owned(tmp_path / "missing.toml")
    assert check_owned(tmp_path / "missing.toml") is None
    assert "symbolic link" in check_owned(link)


def test_a_directory_others_can_change_is_refused_up_to_the_root(tmp_path):
    shared = tmp_path / "shared"
    (shared / "corral").mkdir(parents=True)
    (shared / "corral" / "config.toml").write_text('[ui]\ntheme = "planted"\n')
    shared.chmod(0o777)  # anyone can rename corral/ and put their own there
    with pytest.raises(UntrustedFile) as e:
        read_owned(shared / "corral" / "config.toml")
    assert f"The directory {shared} (above {shared / 'corral'})" in e.value.message
    assert "mode 0777" in e.value.message
    shared.chmod(0o1777)  # sticky, like /tmp: nobody else can rename what is ours
    assert read_owned(shared / "corral" / "config.toml")
    shared.chmod(0o755)
    (shared / "corral").chmod(0o775)
    with pytest.raises(UntrustedFile, match="mode 0775"):
        read_owned(shared / "corral" / "config.toml")


def test_a_group_writable_config_directory_gives_defaults_and_says_why(tmp_path):
    config = tmp_path / "corral" / "config.toml"
    config.parent.mkdir()
    config.write_text('[ui]\ntheme = "planted"\n')
    assert load_config(config).theme == "planted"  # (a sound directory: used)
    config.parent.chmod(0o775)
    got = load_config(config)
    assert got.theme == "corral-dark"
    assert len(got.problems) == 1
    assert "can be changed by other users (mode 0775)" in got.problems[0]
    assert str(config) in got.problems[0] and "defaults" in got.problems[0]
    (tmp_path / "link").mkdir()
    config.parent.chmod(0o755)
    (tmp_path / "link" / "config.toml").symlink_to(config)
    got = load_config(tmp_path / "link" / "config.toml")
    assert "is a symbolic link" in got.problems[0] and got.theme == "corral-dark"


@root_only
def test_a_config_of_another_user_says_so_and_how_to_run_under_sudo(tmp_path, monkeypatch):
    config = tmp_path / "alice" / "config.toml"
    config.parent.mkdir()
    config.write_text('[ui]\ntheme = "alice"\n')
    os.chown(config, NOBODY, NOBODY)
    monkeypatch.setenv("SUDO_UID", str(NOBODY))  # root under `sudo -E`, alice's HOME
    got = load_config(config)
    assert got.theme == "corral-dark"
    assert "belongs to nobody (uid 65534), not to you (root (uid 0))" in got.problems[0]
    assert "sudo -H" in got.problems[0]


@root_only
def test_a_foreign_remotes_toml_is_not_loaded_nor_rewritten(tmp_path):
    store = RemoteStore(tmp_path / "corral")
    store.directory.mkdir()
    store.path.write_text('[[remote]]\nname = "evil"\nkind = "lxd"\n'
                          'address = "https://203.0.113.9:8443"\n')
    os.chown(store.path, NOBODY, NOBODY)
    before = snapshot(store.path)
    entries, problem = store.load()
    assert entries == []
    assert f"{store.path} belongs to nobody (uid 65534)" in problem
    assert "Remotes added in corral are missing" in problem
    with pytest.raises(InvalidInput, match="belongs to nobody"):
        store.add({"name": "lab", "kind": "lxd", "address": "https://10.0.0.5:8443"},
                  "-----BEGIN CERTIFICATE-----\n")
    assert snapshot(store.path) == before
    assert not (store.certs / "lab.crt").exists()


@root_only
def test_a_foreign_vm_json_is_refused_and_shown_as_a_broken_row(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    from backends.local import qemu_remote
    from backends.qemu.quick import first_listing

    vms = tmp_path / "qemu"
    for name in ("good", "planted"):
        (vms / name).mkdir(parents=True)
        VMDefinition(name=name).save(vms / name)
    os.chown(vms / "planted" / "vm.json", NOBODY, NOBODY)
    before = snapshot(vms / "planted" / "vm.json")
    with pytest.raises(UntrustedFile, match="belongs to nobody"):
        VMDefinition.load(vms / "planted")
    rows = {i.name: i for i in first_listing(qemu_remote(str(vms)), 5).instances}
    assert rows["good"].status.value == "stopped"
    assert rows["planted"].status.value == "error"
    assert "vm.json belongs to nobody (uid 65534)" in rows["planted"].description
    assert snapshot(vms / "planted" / "vm.json") == before


@root_only
def test_a_planted_client_key_pair_is_never_reused(tmp_path):
    directory = tmp_path / "corral"
    directory.mkdir()
    crt, key = ensure_client_certificate(directory)  # corral's own pair: made, then reused
    assert ensure_client_certificate(directory) == (crt, key)
    for path in (crt, key):
        os.chown(path, NOBODY, NOBODY)  # planted beside a shared --config
    before = snapshot(key), snapshot(crt)
    with pytest.raises(UntrustedFile) as e:
        ensure_client_certificate(directory)
    assert "client certificate was not used" in e.value.message
    assert f"{key} belongs to nobody" in e.value.message
    assert (snapshot(key), snapshot(crt)) == before
    # a key that is a link to someone's key is refused the same way
    for path in (crt, key):
        os.chown(path, 0, 0)
    elsewhere = tmp_path / "elsewhere.key"
    key.rename(elsewhere)
    key.symlink_to(elsewhere)
    with pytest.raises(UntrustedFile, match="is a symbolic link"):
        ensure_client_certificate(directory)


@root_only
def test_a_remote_added_in_corral_with_a_planted_certificate_is_not_connected(tmp_path):
    directory = tmp_path / "corral"
    directory.mkdir()
    crt, key = ensure_client_certificate(directory)
    server = directory / "servercerts" / "lab.crt"
    write_private(server, b"-----BEGIN CERTIFICATE-----\n", mode=0o644)
    entry = {"name": "lab", "kind": "lxd", "address": "https://10.0.0.5:8443",
             "client_cert": str(crt), "client_key": str(key), "server_cert": str(server)}
    env = {"HOME": str(tmp_path / "home"), "LXD_SOCKET": str(tmp_path / "none.sock"),
           "INCUS_SOCKET": str(tmp_path / "none.sock")}
    found = discover(env, added=[entry], added_source=str(directory / "remotes.toml"))
    assert [r.problem for r in found.remotes if r.name == "lab"] == [None]
    os.chown(server, NOBODY, NOBODY)
    found = discover(env, added=[entry], added_source=str(directory / "remotes.toml"))
    (lab,) = [r for r in found.remotes if r.name == "lab"]
    assert lab.problem.startswith("not connected: ")
    assert f"{server} belongs to nobody" in lab.problem


def test_writes_go_only_into_checked_directories_and_never_through_links(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep")
    target.chmod(0o644)
    before = snapshot(target)
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / "inventory.json").symlink_to(target)
    write_private(directory / "inventory.json", b"{}", mode=0o600)
    assert snapshot(target) == before  # the link was replaced, its target not written
    assert (directory / "inventory.json").read_bytes() == b"{}"
    directory.chmod(0o777)
    with pytest.raises(UntrustedFile, match="mode 0777"):
        write_private(directory / "frame.ansi", b"x", mode=0o600)
    assert sorted(p.name for p in directory.iterdir()) == ["inventory.json"]


def test_append_opens_create_0600_and_never_follow_a_link(tmp_path):
    log = tmp_path / "corral.log"
    with open_owned(log, "a") as f:
        f.write("one\n")
    log.chmod(0o644)  # an older corral's: ours, made private on its descriptor
    with open_owned(log, "a") as f:
        f.write("two\n")
    assert log.read_text() == "one\ntwo\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "other.log"
    link.symlink_to(target)
    with pytest.raises(UntrustedFile, match="symbolic link"):
        open_owned(link, "a")
    assert target.read_text() == "keep"


def test_a_hard_link_is_neither_read_nor_appended_to_nor_chmodded(tmp_path):
    """A name for another file (a hard link: with fs.protected_hardlinks off, anyone may
    make one to /etc/shadow in a sticky /tmp) is one step aside from a symlink: the file
    is this user's, so only its link count tells. It is refused, and the other file keeps
    its bytes and mode."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    victim.chmod(0o644)
    for name in ("corral.log", "config.toml"):
        os.link(victim, tmp_path / name)
    with pytest.raises(UntrustedFile, match="hard links"):
        open_owned(tmp_path / "corral.log", "a")
    with pytest.raises(UntrustedFile, match="hard links"):
        read_owned(tmp_path / "config.toml")
    assert victim.read_text() == "keep" and stat.S_IMODE(victim.stat().st_mode) == 0o644


@root_only
def test_a_link_in_another_users_directory_leads_nowhere(tmp_path):
    """Under ``sudo -E`` corral's directories are in the invoking user's home, refused as
    theirs; a link there (``~/.config/corral -> /etc/x``) led the checks to a directory of
    root's, so corral read and wrote wherever that user chose. The link's own directory
    is judged too: nothing is read, made or written through it."""
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    real = tmp_path / "real"  # root's, private: where the link would lead corral
    real.mkdir(mode=0o700)
    (real / "config.toml").write_text("[ui]\n")
    os.chmod(real / "config.toml", 0o600)
    (home / "corral").symlink_to(real)
    os.lchown(home / "corral", NOBODY, NOBODY)
    with pytest.raises(UntrustedFile, match="symbolic link .*home/corral.*belongs to"):
        read_owned(home / "corral" / "config.toml")
    with pytest.raises(UntrustedFile, match="symbolic link"):
        write_private(home / "corral" / "sub" / "inventory.json", b"{}", mode=0o600)
    with pytest.raises(UntrustedFile, match="symbolic link"):
        open_owned(home / "corral" / "corral.log", "a")
    assert sorted(os.listdir(real)) == ["config.toml"]
    # a link in a directory of one's own (or root's) is fine
    mine = tmp_path / "mine"
    mine.symlink_to(real)
    assert read_owned(mine / "config.toml") == b"[ui]\n"


_AS_NOBODY = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    from backends.paths import UntrustedFile, read_owned
    home = sys.argv[2]
    out = {"euid": os.geteuid()}
    def probe(name, path):
        try:
            out[name] = "read " + read_owned(path).decode()
        except UntrustedFile as e:
            out[name] = "refused: " + e.message
    probe("own", os.path.join(home, "own.toml"))
    probe("planted", os.path.join(home, "planted.toml"))
    probe("link", os.path.join(home, "link.toml"))
    probe("shared", os.path.join(home, "shared", "config.toml"))
    sys.path.insert(0, sys.argv[3])
    os.environ["XDG_STATE_HOME"] = os.path.join(home, "state")
    os.environ["HOME"] = home
    os.environ["XDG_CONFIG_HOME"] = os.path.join(home, "config")
    os.environ.pop("CORRAL_CONFIG_FILE", None)
    from tui import logfile
    from tui.config import load_config
    out["log"] = str(logfile.setup())
    out["log_problem"] = logfile.problem
    out["config"] = list(load_config().problems)
    print(json.dumps(out))
""")


def _python_for(uid: int) -> str:
    """A Python 3.11+ that ``uid`` may run (this venv may sit in root's home)."""
    for candidate in (sys.executable, getattr(sys, "_base_executable", ""),
                      shutil.which("python3") or "", "/usr/bin/python3"):
        if candidate and subprocess.run(
                ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", candidate,
                 "-c", "import sys; assert sys.version_info >= (3, 11)"],
                capture_output=True).returncode == 0:
            return candidate
    raise AssertionError(f"no Python 3.11 that uid {uid} can run")


@root_only
def test_the_checks_hold_for_a_user_who_is_not_root():
    """As ``nobody``: its own file is read; a root-owned file in its directory, a link and
    a file under a directory others can write are refused; a planted log link and a
    config of another user are refused in words (the log's target untouched)."""
    base = Path(tempfile.mkdtemp(prefix="corral-nobody-", dir="/tmp"))
    try:
        base.chmod(0o755)
        code = base / "code"  # a copy nobody can read, wherever the checkout is
        for package in ("backends", "tui"):
            shutil.copytree(Path(__file__).parents[2] / package, code / package,
                            ignore=shutil.ignore_patterns("__pycache__"))
        home = base / "home"
        (home / "shared").mkdir(parents=True)
        (home / "state" / "corral").mkdir(parents=True)
        (home / "config" / "corral").mkdir(parents=True)
        (home / "own.toml").write_text("mine")
        (home / "planted.toml").write_text("root's")
        (home / "link.toml").symlink_to(home / "own.toml")
        (home / "shared" / "config.toml").write_text("x")
        victim = base / "victim"
        victim.write_text("keep")
        (home / "state" / "corral" / "corral.log").symlink_to(victim)
        (home / "config" / "corral" / "config.toml").write_text("[ui]\n")
        for path in [home, *home.rglob("*")]:
            if path.name not in ("planted.toml", "config.toml") or path.parent.name == "shared":
                os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        (home / "shared").chmod(0o777)
        before = snapshot(victim)
        result = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             _python_for(NOBODY), "-c", _AS_NOBODY, str(code), str(home), str(code)],
            capture_output=True, text=True, timeout=60, cwd=base)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert snapshot(victim) == before  # the log's link was not followed, nor chmodded
    finally:
        shutil.rmtree(base)
    assert out["euid"] == NOBODY
    assert out["own"] == "read mine"
    assert "planted.toml belongs to root (uid 0), not to you (nobody (uid 65534))" in \
        out["planted"]
    assert "link.toml is a symbolic link" in out["link"]
    assert "can be changed by other users (mode 0777)" in out["shared"]
    assert out["log"] == "None" and "corral.log is a symbolic link" in out["log_problem"]
    assert "config.toml belongs to root (uid 0)" in out["config"][0]


async def test_the_refusals_are_shown_on_the_start_screen(tmp_path, monkeypatch):
    """A FIFO as the cache, a planted log link and a config directory others can write:
    the app starts (nothing hangs) and its problems panel says each in words."""
    from tui import logfile
    from tui.app import make_app
    from tui.services.cache import cache_path

    home = tmp_path / "home"
    (home / "cfg" / "corral").mkdir(parents=True)
    config = home / "cfg" / "corral" / "config.toml"
    config.write_text("[lxc]\nenabled = false\n[qemu]\nenabled = false\n")
    config.parent.chmod(0o775)
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_STATE_HOME": str(home / "state"), "LXD_SOCKET": str(tmp_path / "none"),
           "INCUS_SOCKET": str(tmp_path / "none"), "PATH": os.environ.get("PATH", "")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    fifo = cache_path(env, config)
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    (home / "state" / "corral").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (home / "state" / "corral" / "corral.log").symlink_to(victim)
    monkeypatch.setattr(logfile, "problem", None)
    monkeypatch.setattr(logging.getLogger(), "handlers", list(logging.getLogger().handlers))
    assert logfile.setup(env) is None
    app = make_app(config, env=env)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        shown = str(app.screen.query_one("#problems").render())
    assert f"{config.parent} can be changed by other users (mode 0775)" in shown
    assert f"The inventory cache was not used: {fifo} is a FIFO" in shown
    assert "No log is written" in shown and "corral.log is a symbolic link" in shown
    assert victim.read_text() == "keep"
    # the FIFO was never opened; the rows saved at quit replaced it (renamed over it)
    assert not stat.S_ISFIFO(os.lstat(fifo).st_mode)


@root_only
def test_planted_state_and_qemu_bookkeeping_files_are_not_acted_on(tmp_path):
    """The remembered projects, the KVM fallback note and the markers a sweep of the QEMU
    directory acts on (an export's ``target`` names a file it deletes)."""
    from backends.qemu.files import EXPORT_PREFIX, sweep
    from backends.qemu.kvm import HostFallback
    from tui.services.projects import remember, remembered

    state = tmp_path / "state" / "projects.json"
    state.parent.mkdir()
    state.write_text('{"prod": "planted"}')
    os.chown(state, NOBODY, NOBODY)
    assert remembered(state) == {}
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("keep")
    state.unlink()
    (state.parent / "projects.tmp").symlink_to(elsewhere)  # the old fixed temporary name
    remember("prod", "web", state)
    assert remembered(state) == {"prod": "web"} and elsewhere.read_text() == "keep"

    vms = tmp_path / "qemu"
    vms.mkdir()
    note = HostFallback(vms)
    note.remember("KVM hung")
    assert note.reason() == "KVM hung"
    os.chown(note.path, NOBODY, NOBODY)
    assert note.reason() == ""

    victim = tmp_path / "victim.part"
    victim.write_text("someone's file")
    scratch = vms / f"{EXPORT_PREFIX}planted"
    scratch.mkdir()
    (scratch / "target").write_text(str(victim))
    os.chown(scratch / "target", NOBODY, NOBODY)
    assert sweep(vms) == []
    assert victim.read_text() == "someone's file" and scratch.is_dir()
    os.chown(scratch / "target", 0, 0)  # corral's own leftover: swept
    assert sweep(vms) == [str(victim), str(scratch)]
