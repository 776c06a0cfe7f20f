"""``corral --list-remotes``: every remote the UI would show (LXD/Incus, corral's own,
QEMU, LXC), each connected once to say its state, then the configuration problems.

The remotes are the app's own (the same ``CorralApp`` is built, not run), so the list
and the UI never disagree; ``--remote`` narrows both alike. Exits 1 when nothing is
found or any remote has a problem, so scripts can tell.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from backends.errors import AuthError, BackendError, NotResponding
from backends.models import Remote

from .config import Config
from .services.supervisor import BackendFactory, backend_factory


async def _state(remote: Remote, timeout: float, make: BackendFactory) -> tuple[str, str]:
    """(state word, detail) of one remote, after connecting and listing once."""
    if remote.problem:
        return "error", remote.problem
    backend = make(remote, timeout)
    try:
        async with asyncio.timeout(timeout * 2):
            info = await backend.connect()
            count = len(await backend.list_instances())
        return "connected", f"{info.server} {info.version}, {count} instance" + (
            "s" if count != 1 else "")
    except TimeoutError:
        return "no answer", f"no answer within {timeout * 2:g} s"
    except AuthError as e:
        return "untrusted", e.message
    except NotResponding as e:
        return "no answer", e.message
    except BackendError as e:
        return "offline", e.message
    finally:
        await backend.close()


async def _states(remotes: list[Remote], timeout: float, config: Config
                  ) -> list[tuple[str, str]]:
    make = backend_factory(config.backend_options)  # as the UI makes them
    return await asyncio.gather(*(_state(r, timeout, make) for r in remotes))


def list_remotes(config_path: Path | None, names: list[str] | None) -> int:
    """Print the remotes and their states; the exit status (0: all connected)."""
    from .app import make_app

    app = make_app(config_path, remote_names=names)
    remotes = app.remotes
    states = asyncio.run(_states(remotes, app.config.network_timeout, app.config))
    for remote, (state, detail) in zip(remotes, states):
        project = f" project={remote.project}" if remote.project != "default" else ""
        print(f"{remote.name:16} {remote.kind:6} {state:10} {remote.address}{project}"
              f"  ({detail})")
    for problem in app.problems:
        print(f"problem: {problem}")
    if not remotes:
        print("No remote found. Looked for: " + ", ".join(app.looked_in), flush=True)
        return 1
    return 0 if not app.problems and all(s == "connected" for s, _ in states) else 1
