"""Shared fixtures. The real-daemon lab starts once per session, on first use.

In CI a missing daemon is a failure, never a skip: if the lab cannot start, every test that
needs it errors with the reason. Developers without the lab deselect explicitly:
``pytest -m "not lab"`` (tests are marked by what their fixtures start: tests/tiers.py).
Every test runs in a hermetic environment under a socket guard (tests/hermetic.py).
docs/testing.md describes the tiers and both guards.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import hermetic
import lab as labmod
import tiers


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: starts a real daemon or guest (tests/tiers.py)")
    for kind, words in tiers.KINDS.items():
        config.addinivalue_line("markers", f"{kind}: {words} (implies lab; tests/tiers.py)")


def pytest_collection_modifyitems(items):
    """Mark each test by what its fixtures start (tests/tiers.py): ``-m "not lab"`` is the
    tier without root or daemons, ``-m qemu`` the QEMU tests, and so on."""
    tiers.mark(items, pytest)


def pytest_terminal_summary(terminalreporter):
    """The CPU this run used (its processes and the children it waited for: xdist workers,
    daemons the lab started, tools; not a guest QEMU that detached itself): where the
    suite's time goes on a CI machine whose cores are all busy."""
    import resource

    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    terminalreporter.write_line(
        f"CPU: {own.ru_utime + own.ru_stime:.0f} s in pytest, "
        f"{children.ru_utime + children.ru_stime:.0f} s in the children it waited for")


@pytest.fixture(scope="session", autouse=True)
def _spawn_watch():
    watch = tiers.SpawnWatch()
    watch.install()
    yield watch
    watch.uninstall()


@pytest.fixture(autouse=True)
def _needs_root(request):
    """A test marked ``root`` fails without root, with the reason: it is in the lab tier,
    which CI runs as root (never skipped)."""
    if request.node.get_closest_marker("root") and os.geteuid() != 0:
        pytest.fail("this test plants files as another user and needs root "
                    "(run ./scripts/test.sh as root or through sudo)", pytrace=False)


@pytest.fixture(autouse=True)
def _tier_guard(request, _spawn_watch):
    """Fails a test outside the ``lab`` tier that starts a daemon or a guest."""
    _spawn_watch.take()
    _spawn_watch.lab = request.node.get_closest_marker("lab") is not None
    yield
    _spawn_watch.lab = True
    started = _spawn_watch.take()
    if started:
        pytest.fail(_spawn_watch.message(request.node.nodeid, started), pytrace=False)


@pytest.fixture(scope="session")
def lab():
    """Two LXD daemons and one Incus daemon, with lxc/incus CLI configs in a temp HOME."""
    reason = labmod.unavailable_reason()
    if reason:
        pytest.fail(f"the real-daemon lab cannot run here: {reason}", pytrace=False)
    yield from _running(labmod.Lab(), "the real-daemon lab failed to start")


def _running(daemons, failed: str):
    """Start ``daemons`` (a Lab or a Cluster), yield it, stop it; if it does not start, the
    test fails with ``failed`` and the reason."""
    # A SIGTERM (a CI time-out, a killed run) must still stop the daemons: turn it into
    # the KeyboardInterrupt pytest handles by running finalizers.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        daemons.start()
    except Exception as e:
        daemons.stop()
        pytest.fail(f"{failed}: {e}", pytrace=False)
    yield daemons
    daemons.stop()
    signal.signal(signal.SIGTERM, previous)


def _cluster(kind: str):
    import lab_cluster

    reason = labmod.unavailable_reason((kind,))
    if reason:
        pytest.fail(f"the {kind} cluster cannot run here: {reason}", pytrace=False)
    yield from _running(lab_cluster.Cluster(kind), f"the {kind} cluster failed to form")


@pytest.fixture(scope="session")
def lxd_cluster():
    """A real 3-member LXD cluster (m1..m3) on loopback, with a CLI config holding ``clu``."""
    yield from _cluster("lxd")


@pytest.fixture(scope="session")
def incus_cluster():
    """The same with three Incus daemons."""
    yield from _cluster("incus")


def _interrupt(*_args):
    raise KeyboardInterrupt("SIGTERM")


@pytest.fixture
def lxc_path(tmp_path_factory):
    """A private lxcpath (LXC tools required: a missing tool fails, never skips)."""
    import shutil

    missing = [t for t in ("lxc-create", "lxc-start", "lxc-monitor", "lxc-snapshot")
               if shutil.which(t) is None]
    if missing:
        pytest.fail(f"LXC tools missing: {', '.join(missing)} (run scripts/setup-lab.sh)",
                    pytrace=False)
    path = tmp_path_factory.mktemp("lxcpath")
    os.chmod(path, 0o755)
    yield path
    # stop and destroy whatever a test left behind
    import subprocess

    for entry in path.iterdir():
        if (entry / "config").is_file():
            subprocess.run(["lxc-stop", "-P", str(path), "-n", entry.name, "-k"],
                           capture_output=True)
            subprocess.run(["lxc-destroy", "-P", str(path), "-n", entry.name, "-s"],
                           capture_output=True)


@pytest.fixture
def lab_env(lab):
    """The lab's environment: HOME, LXD_CONF, INCUS_CONF, LXD_DIR (local = lxd1)."""
    return lab.env()


@pytest.fixture
def unique(request):
    """A name unique to this test (LXD names: letters, digits, dashes)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())
    base = "-".join(p for p in base.split("-") if p)[:30].strip("-")
    return lambda suffix="": f"{base}-{uuid.uuid4().hex[:6]}{suffix}".strip("-")


@pytest.fixture(scope="session", autouse=True)
def fake_host(tmp_path_factory):
    """The host's system paths (sockets, /etc/lxd, /var/lib/lxc), moved under a session temp
    dir for every test, and the socket guard (tests/hermetic.py). A test may start a daemon
    at ``fake_host.path("/var/lib/lxd")`` to play a host with a system LXD."""
    base = tmp_path_factory.getbasetemp()
    host = hermetic.FakeHost(base / "host")
    guard = hermetic.Guard(denied=[host.root])
    guard.allow_path(base)
    guard.install()
    hermetic.GUARD = guard
    patch = pytest.MonkeyPatch()
    host.install(patch)
    yield host
    patch.undo()
    guard.uninstall()
    hermetic.GUARD = None


@pytest.fixture(autouse=True)
def _socket_guard(fake_host):
    """Fails the test that connected to a socket outside its lab (the message says which)."""
    guard = hermetic.GUARD
    guard.take()  # left by a thread of an earlier test
    yield guard
    blocked = guard.take()
    if blocked:
        pytest.fail("\n".join(dict.fromkeys(blocked)), pytrace=False)


@pytest.fixture(autouse=True)
def hermetic_env(_socket_guard, tmp_path, tmp_path_factory, monkeypatch):
    """The one hermetic environment (tests/hermetic.py), returned for app and backend
    set-ups, and in ``os.environ`` for every test: HOME and XDG_RUNTIME_DIR in temp dirs,
    LXD_DIR/INCUS_DIR where no daemon is; nothing of the developer's own (XDG dirs, CLI
    config and socket variables, corral config, Textual devtools, a libvirt URI)."""
    runtime = hermetic.runtime_dir()
    env = hermetic.environment(tmp_path_factory.mktemp("home"), runtime)
    for var in (*hermetic.HOST_VARS, "TEXTUAL", "TEXTUAL_DEVTOOLS_PORT"):
        monkeypatch.delenv(var, raising=False)
    for var in hermetic.OS_VARS:
        monkeypatch.setenv(var, env[var])
    monkeypatch.setenv("CORRAL_CONFIG_FILE", str(tmp_path / "no-corral-config.toml"))
    yield {**os.environ, **env}
    shutil.rmtree(runtime, ignore_errors=True)
