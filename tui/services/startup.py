"""What corral knows before its UI exists: the configuration, the remotes it shows, and the
first listing of every remote that can be listed without its backend.

The ``corral`` command resolves the remotes and starts those listings first, in threads,
and only then imports the UI (Textual and corral's screens: most of a start's CPU). The
daemons answer while the UI loads, so the first frame can already hold current rows.
No Textual here.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path

from backends import FIRST_LISTINGS, first_listing, threads
from backends.models import FirstListing, Remote
from backends.remote_store import RemoteStore
from backends.remotes import ConfigProblem, discover

from ..config import Config, load_config
from .projects import apply_remembered

log = logging.getLogger(__name__)


@dataclass
class Start:
    """The configuration and remotes one run of corral starts with."""

    config: Config
    store: RemoteStore
    remotes: list[Remote]
    problems: list[str]
    """What is wrong in the configuration files, one sentence each."""
    looked_in: list[str]
    first_listings: dict[str, Future[FirstListing | None]] = field(default_factory=dict)
    """Remote name -> its first listing, under way or done (only remotes that have one)."""


def resolve(config: Config, env: Mapping[str, str],
            remote_names: list[str] | None = None) -> Start:
    """The remotes ``config`` and the ``lxc``/``incus`` configurations in ``env`` name
    (only ``remote_names`` when given), in the project each was last shown in."""
    store = RemoteStore(config.path.parent)
    added, store_problem = store.load()
    found = discover(
        env,
        added=added,
        added_source=str(store.path),
        extra=config.remotes,
        extra_source=str(config.path),
        read_only=config.read_only_remotes,
        hidden=config.hide_remotes,
    )
    remotes = found.remotes
    if config.qemu_enabled and shutil.which("qemu-system-x86_64"):
        from backends.local import qemu_remote

        if "qemu" not in config.hide_remotes:
            remotes.append(qemu_remote(config.qemu_path or None))
    if config.lxc_enabled:
        from backends.local import lxc_remotes

        remotes += [r for r in lxc_remotes(config.lxc_paths)
                    if r.name not in config.hide_remotes]
    if remote_names:
        unknown = [n for n in remote_names if n not in {r.name for r in remotes}]
        remotes = [r for r in remotes if r.name in remote_names]
        if unknown:
            known = ", ".join(r.name for r in found.remotes) or "none"
            found.problems.append(ConfigProblem(
                "--remote", f"no remote named {', '.join(unknown)} (known: {known})"))
    remotes = apply_remembered(remotes)  # the project each remote was last shown in
    problems = [str(p) for p in found.problems] + list(config.problems)
    problems += [store_problem] if store_problem else []
    problems += owned_file_problems(config, env)
    return Start(config, store, remotes, problems, list(found.looked_in))


def owned_file_problems(config: Config, env: Mapping[str, str]) -> list[str]:
    """corral's own files refused at start-up (tui/logfile.py, tui/services/cache.py):
    no log, or no rows from the last run, and why, in words."""
    from .. import logfile
    from .cache import refusal

    problems = [logfile.problem] if logfile.problem else []
    cache = refusal(env, config.path) if config.warm_start else None
    return problems + ([cache] if cache else [])


def prepare(config_path: Path | None, env: Mapping[str, str], *, theme: str | None = None,
            remote_names: list[str] | None = None, listings: bool = True) -> Start:
    """Read the configuration, resolve the remotes and (``listings``) start their first
    listings."""
    config = load_config(config_path)
    if theme:
        config = replace(config, theme=theme)
    start = resolve(config, env, remote_names)
    if listings:
        start.first_listings = start_listings(start.remotes, config.network_timeout)
    return start


def start_listings(remotes: list[Remote], timeout: float
                   ) -> dict[str, Future[FirstListing | None]]:
    """One daemon thread per remote with a first listing (a hung remote holds only its
    own, and does not keep the process alive)."""
    out: dict[str, Future[FirstListing | None]] = {}
    for remote in remotes:
        if remote.kind not in FIRST_LISTINGS or remote.problem:
            continue
        future: Future[FirstListing | None] = Future()
        future.set_running_or_notify_cancel()

        def run(remote: Remote = remote, future: Future = future) -> None:
            try:
                future.set_result(first_listing(remote, timeout=timeout))
            except BaseException as e:  # the backend's connect reports it
                log.debug("%s: no first listing (%s: %s)", remote.name, type(e).__name__, e)
                future.set_exception(e)

        threads.run(run, name=f"first-listing-{remote.name}")
        out[remote.name] = future
    return out
