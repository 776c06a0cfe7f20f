"""One verb on many marked rows: one confirmation that lists them, every row tried (one
failure does not stop the others), each row's result kept in the operations view, and a
summary in words."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from backends.errors import BackendError
from backends.models import Operation

from ..format import external, printable
from ..screens.dialogs import ConfirmDialog
from ..services.inventory import Inventory

if TYPE_CHECKING:
    from textual.app import App


@dataclass(frozen=True)
class Target:
    remote: str
    name: str
    work: Callable[[], Awaitable[object]]
    """Does it; what it returns, when a string, is its outcome in words (kept with the
    result: "already current")."""
    instance: bool = False


def listing(names: list[str], limit: int = 12) -> str:
    shown = "\n".join(f"  • {n}" for n in names[:limit])
    more = len(names) - limit
    return shown + (f"\n  … and {more} more" if more > 0 else "")


async def confirm(app: App, verb: str, names: list[str], note: str = "", *,
                  destructive: bool = True, first: str = "", button: str = "") -> bool:
    """One question for all of them (names from daemons: plain text, never markup).
    ``first`` is said before the list, where a small terminal still shows it (what is done
    besides ``verb``: "stopped by force first"); ``button`` names the confirm button."""
    one = len(names) == 1
    text = (f"{verb.capitalize()} {names[0]}?" if one else
            f"{verb.capitalize()} these {len(names)}?")
    if first:
        text += f"\n{first}"
    if not one:  # as many names as leave the buttons on the screen (80x24: four)
        text += f"\n\n{listing(names, max(3, min(12, app.size.height - 20)))}"
    if note:
        text += f"\n\n{note}"
    answer = await app.push_screen_wait(ConfirmDialog(
        f"{verb.capitalize()} {names[0]}" if one else f"{verb.capitalize()} {len(names)} marked",
        external(text, lines=True),
        button or (verb.capitalize() if one else f"{verb.capitalize()} all"),
        destructive=destructive))
    return bool(answer)


def record(inventory: Inventory, remote: str, what: str, error: str = "",
           instances: tuple[str, ...] = ()) -> None:
    """Keep one row's result for the operations view."""
    status = inventory.statuses.get(remote)
    if status is None:
        return
    status.results.append(Operation(
        id=f"corral-{uuid.uuid4().hex[:12]}", remote=remote, description=what,
        status="Failure" if error else "Success", error=error, instances=instances,
        created_at=datetime.now(UTC)))


async def run_all(app: App, inventory: Inventory, verb: str, targets: list[Target], *,
                  parallel: int = 4) -> list[tuple[Target, str]]:
    """Run every target's work (``parallel`` at a time); returns (target, error) for the
    failures. Each result is recorded, and the user told the outcome."""
    gate = asyncio.Semaphore(parallel)
    failures: list[tuple[Target, str]] = []
    done = 0
    remotes = sorted({t.remote for t in targets})

    def progress() -> None:
        for remote in remotes:
            inventory.show_activity(remote, f"{verb} {done}/{len(targets)} marked")

    async def one(t: Target) -> None:
        nonlocal done
        async with gate:
            error, outcome = "", None
            try:
                outcome = await t.work()
            except BackendError as e:
                error = e.message
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one row's surprise is its own result
                error = f"{type(e).__name__}: {e}"
            done += 1
            if error:
                failures.append((t, error))
            said = f": {outcome}" if isinstance(outcome, str) and outcome and not error else ""
            record(inventory, t.remote, f"{verb} {t.name}{said}", error,
                   (t.name,) if t.instance else ())
            progress()

    progress()
    try:
        await asyncio.gather(*(one(t) for t in targets))
    finally:
        for remote in remotes:
            inventory.show_activity(remote, "")
    ok = len(targets) - len(failures)
    if failures:
        lines = "\n".join(f"{t.remote}:{t.name}: {why}" for t, why in failures[:8])
        app.notify(printable(f"{verb.capitalize()}: {ok} of {len(targets)} done; "
                             f"failed:\n{lines}", lines=True),
                   title=f"{verb.capitalize()} marked", severity="error", timeout=15,
                   markup=False)
    else:
        app.notify(f"{verb.capitalize()}: all {len(targets)} done.",
                   title=f"{verb.capitalize()} marked", markup=False)
    return failures
