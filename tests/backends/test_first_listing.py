"""The first listing (``backends.first_listing``), made before any backend exists: against
the lab's real LXD and Incus daemons it lists what the backend lists, imports neither
pylxd nor requests, and refuses what the backend refuses (an untrusted client, a missing
socket, a certificate that is not the pinned one: tests/backends/test_security_lxd.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from backend_checks import stranger_remotes
from backends import first_listing
from backends.errors import AuthError, Unreachable
from backends.remotes import discover

ROOT = Path(__file__).resolve().parents[2]


def lab_remotes(env):
    return {r.name: r for r in discover(env).remotes}


def summary(instances):
    return {(i.ref, i.status, i.type, i.image, i.location, i.profiles) for i in instances}


async def test_first_listing_is_what_the_backend_lists(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    made = unique()
    daemon.cli("init", "busybox", made)
    try:
        first = await asyncio.to_thread(first_listing, backend.remote, timeout=10)
        listed = await backend.list_instances()
        assert first is not None and first.remote == backend.remote
        assert made in {i.ref.name for i in first.instances}
        assert summary(first.instances) == summary(listed)
        assert (first.info.server, first.info.version, first.info.api_extensions) == \
            (info.server, info.version, info.api_extensions)
    finally:
        daemon.cli("delete", "--force", made, check=False)


async def test_the_listing_after_connecting_parses_nothing_the_first_listing_read(
        remote_backend, unique, monkeypatch):
    """The backend lists again once its event stream is open (nothing changed meanwhile
    may be missed). When the daemon answers the bytes the first listing read, nothing is
    parsed or converted again: at start that is hundreds of instances per remote, on the
    loop that is connecting the others. An answer that changed is read in full."""
    from backends.lxd import convert

    name, backend, info, daemon = remote_backend
    made = unique()
    daemon.cli("init", "busybox", made)
    try:
        first = await asyncio.to_thread(first_listing, backend.remote, timeout=10)
        parsed: list[str] = []
        real = convert.to_instance
        monkeypatch.setattr(convert, "to_instance",
                            lambda d, remote: (parsed.append(d.get("name")), real(d, remote))[1])
        listed = await backend.list_instances()
        assert parsed == []
        assert summary(listed) == summary(first.instances)
        assert await backend.list_instances() == listed and parsed == []  # its own, too
        daemon.cli("start", made)
        after = {i.ref.name: i for i in await backend.list_instances()}
        assert made in parsed and len(parsed) == len(after)
        assert after[made].status.value == "running"
    finally:
        daemon.cli("delete", "--force", made, check=False)


async def test_the_backend_connects_with_the_first_listings_server_answer(
        remote_backend, monkeypatch):
    """The first listing's ``GET /1.0`` (who the server is, that it trusts this client),
    a moment old, stands for the backend's own: its connection starts with the event
    stream. Once only, and not when it is older than ``HOST_FRESH``."""
    from backends import get_backend
    from backends.lxd import quick
    from backends.lxd.fasthttp import FastGet

    name, backend, info, daemon = remote_backend
    asked: list[str] = []
    real = FastGet.get_json
    monkeypatch.setattr(FastGet, "get_json",
                        lambda self, path, *a, **k: (asked.append(path), real(self, path, *a, **k))[1])
    await asyncio.to_thread(first_listing, backend.remote, timeout=10)
    asked.clear()
    fresh = get_backend(backend.remote, timeout=10)
    try:
        assert await fresh.connect() == info
        assert "" not in asked
    finally:
        await fresh.close()
    again = get_backend(backend.remote, timeout=10)  # taken already: asked again
    try:
        assert await again.connect() == info
        assert "" in asked
    finally:
        await again.close()
    await asyncio.to_thread(first_listing, backend.remote, timeout=10)
    asked.clear()
    monkeypatch.setattr(quick, "HOST_FRESH", 0.0)
    old = get_backend(backend.remote, timeout=10)
    try:
        assert await old.connect() == info
        assert "" in asked
    finally:
        await old.close()


def test_first_listing_needs_neither_pylxd_nor_requests(lab, lab_env):
    script = (
        "import json, os, sys\n"
        "from backends import first_listing\n"
        "from backends.remotes import discover\n"
        "out = {r.name: len(first_listing(r, timeout=10).instances)\n"
        "       for r in discover(os.environ).remotes if r.name in ('local', 'lab2', 'inc1')}\n"
        "out['imported'] = [m for m in ('pylxd', 'requests', 'websockets', 'textual')\n"
        "                   if m in sys.modules]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, **lab_env},
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(done.stdout)
    assert out.pop("imported") == []
    assert set(out) == {"local", "lab2", "inc1"}


def test_first_listing_refuses_an_untrusted_client_and_a_missing_socket(lab, lab_env,
                                                                        tmp_path):
    stranger = stranger_remotes(lab, lab_env, tmp_path)["lab2"]
    with pytest.raises(AuthError, match="does not trust this client"):
        first_listing(stranger, timeout=5)
    local = lab_remotes(lab_env)["local"]
    with pytest.raises(Unreachable, match="No socket"):
        first_listing(replace(local, address=f"unix://{tmp_path}/gone.sock"), timeout=5)


def test_first_listing_of_a_project_lists_that_project(lab, lab_env, unique):
    project, made = unique("p"), unique()
    lab.lxd1.cli("project", "create", project, "-c", "features.images=false",
                 "-c", "features.profiles=false")
    try:
        lab.lxd1.cli("init", "busybox", made, "--project", project)
        local = replace(lab_remotes(lab_env)["local"], project=project)
        first = first_listing(local, timeout=10)
        assert [(i.ref.name, i.ref.project) for i in first.instances] == [(made, project)]
    finally:
        lab.lxd1.cli("delete", "--force", made, "--project", project, check=False)
        lab.lxd1.cli("project", "delete", project, check=False)
