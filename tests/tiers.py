"""The test tiers: a test is marked by what it starts, so ``-m "not lab"`` is exactly the
tier that needs no root and no daemon.

At collection (``pytest_collection_modifyitems`` in tests/conftest.py) a test that uses a
fixture of :data:`STARTS` - directly or through another fixture (``item.fixturenames`` is
the whole closure) - gets that fixture's kind markers and ``lab``; a test marked by hand
with a kind (``@pytest.mark.qemu`` for one that starts QEMU itself) gets ``lab`` too.

:class:`SpawnWatch` keeps it honest at run time: a test without ``lab`` that starts a
daemon or a guest (LXD, Incus, libvirt, QEMU, the LXC tools) fails, naming the program and what to
do. It sees every ``subprocess.Popen`` of the pytest process (``subprocess.run`` and
asyncio's subprocesses included), not what a child starts in turn.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading

KINDS = {
    "lxd": "starts (or uses) the lab's private LXD daemons",
    "incus": "starts (or uses) the lab's private Incus daemon",
    "qemu": "starts real QEMU (the test guest, under TCG)",
    "lxc": "starts LXC containers in a private lxcpath",
    "cluster": "forms a 3-member LXD or Incus cluster on loopback",
    "libvirt": "starts the suite's private libvirtd (tests/lab_libvirt.py)",
    "root": "plants files as another user, so it needs root (fails without it)",
}

STARTS: dict[str, tuple[str, ...]] = {
    "lab": ("lxd", "incus"),
    "lxd_cluster": ("lxd", "cluster"),
    "incus_cluster": ("incus", "cluster"),
    "guest": ("qemu",),
    "display_guest": ("qemu",),
    "qemu": ("qemu",),
    "lxc_path": ("lxc",),
    "open_lxcpath": ("lxc",),  # tests/backends/test_security_lxc_archives.py
    "vlab": ("libvirt",),  # tests/backends/test_libvirt_*.py
    "vlab2": ("libvirt",),  # the second lab host (tests/backends/test_libvirt_migrate.py)
}
"""Fixture -> the kinds of daemon it starts. A new fixture that starts one belongs here."""


_SUBJECTS = {"lxd": STARTS["lab"], "incus": STARTS["lab"], "lxc": ("lxc",), "qemu": ("qemu",)}
DYNAMIC = {
    "cluster": lambda kind: STARTS.get(f"{kind}_cluster", ()),
    "subject": lambda kind: _SUBJECTS.get(kind, ()),
}
"""Parametrized fixtures that ask for a daemon fixture by name (``getfixturevalue``), which
``fixturenames`` cannot show: fixture -> (its parameter -> kinds)."""


def kinds_of(fixturenames, params: dict, marked: set[str]) -> set[str]:
    """The kind markers a test gets: from its fixtures (and the parameter of a
    :data:`DYNAMIC` one), plus the kinds it was marked with."""
    kinds = {k for f in fixturenames for k in STARTS.get(f, ())}
    for name, kinds_for in DYNAMIC.items():
        if name in fixturenames and isinstance(params.get(name), str):
            kinds |= set(kinds_for(params[name]))
    return kinds | (marked & set(KINDS))


def mark(items, pytest) -> None:
    for item in items:
        marked = {m.name for m in item.iter_markers()}
        callspec = getattr(item, "callspec", None)
        kinds = kinds_of(getattr(item, "fixturenames", ()),
                         dict(callspec.params) if callspec else {}, marked)
        for kind in sorted(kinds - marked):
            item.add_marker(getattr(pytest.mark, kind))
        if kinds and "lab" not in marked:
            item.add_marker(pytest.mark.lab)
        group = group_of(kinds | marked)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


GROUPS = (("cluster", "clusters"), ("lxd", "lxd"), ("incus", "lxd"), ("libvirt", "libvirt"),
          ("qemu", "qemu"), ("lxc", "lxc"), ("root", "lxc"))
"""Kind -> the group of lab tests that share one process when the lab tier runs in parallel
(``--dist loadgroup``): the first kind a test has in this order names it. A group's tests
share the session's daemons of their kind, so each daemon is started by one process only;
groups share nothing and run side by side."""


def group_of(kinds: set[str]) -> str | None:
    return next((group for kind, group in GROUPS if kind in kinds), None)


def daemon_program(args) -> str | None:
    """The daemon or guest ``args`` (a Popen argument) starts, else None."""
    try:
        argv = shlex.split(args) if isinstance(args, (str, bytes)) else [os.fsdecode(a) for a in args]
    except (TypeError, ValueError):
        return None
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name.startswith("qemu-system"):
        if any(a in ("--version", "-version", "--help", "-help") for a in argv[1:]):
            return None
        return name
    if name in ("lxd", "incusd", "libvirtd", "virtqemud") or name.startswith("lxc-"):
        return name
    return None


class SpawnWatch:
    """Records daemons started by tests that are not marked ``lab``."""

    def __init__(self) -> None:
        self.lab = True  # outside a test (session fixtures): anything goes
        self.violations: list[str] = []
        self._lock = threading.Lock()
        self._saved = None

    def install(self) -> None:
        real = subprocess.Popen.__init__
        watch = self

        def __init__(popen, *a, **kw):
            if not watch.lab:
                program = daemon_program(a[0] if a else kw.get("args", ()))
                if program:
                    with watch._lock:
                        watch.violations.append(program)
            return real(popen, *a, **kw)

        self._saved = real
        subprocess.Popen.__init__ = __init__

    def uninstall(self) -> None:
        if self._saved is not None:
            subprocess.Popen.__init__ = self._saved

    def take(self) -> list[str]:
        """The programs started since the last call (without repeats)."""
        with self._lock:
            got, self.violations = self.violations, []
        return list(dict.fromkeys(got))

    def message(self, test: str, programs: list[str]) -> str:
        return (f"tier guard: {test} started {', '.join(programs)} but is not marked 'lab', "
                "so it would run in the no-daemon tier (-m \"not lab\"): use the fixture that "
                "starts it (tests/tiers.py STARTS) or mark the test with its kind, e.g. "
                "@pytest.mark.qemu")
