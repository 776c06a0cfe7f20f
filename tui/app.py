"""The corral application and the factory the CLI and the tests share."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
from pathlib import Path
from typing import Mapping

from textual import events
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from backends import BackendError, preload, threads
from backends.models import ConnectionState
from themes import BUILTIN_THEMES, DEFAULT_VARIABLES, STYLESHEET

from . import _textual_compat as compat
from .commands import InstanceCommands
from .config import Config, load_config
from .flows.context import Settings
from .keyboard import KeyGate
from .screens.main import MainScreen
from .services.cache import InventoryCache, cache_path
from .services.inventory import BackendFactory, Inventory
from .services.supervisor import backend_factory
from .services.startup import Start, resolve
from .lastframe import Spec

log = logging.getLogger(__name__)

FREEZE_QUIET = 0.5
"""Seconds of quiet (no inventory change) once every remote is connected and listed, or has
failed, after which the objects made so far leave the cyclic GC's care (and the collector,
off until then when started by the ``corral`` command, runs again)."""
FREEZE_LATEST = 10.0
"""…and at the latest this many seconds after start-up, whatever the remotes do."""
CACHE_DELAY = 3.0
"""Seconds between a change and saving the inventory cache (changes in between coalesce)."""


class CorralApp(App[None]):
    """One inventory of containers and VMs across remotes."""

    CSS_PATH = str(STYLESHEET)
    TITLE = "corral"
    COMMANDS = App.COMMANDS | {InstanceCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit corral"),
        Binding("question_mark", "help", "Help", id="app.help", tooltip="Show every key"),
    ]

    def __init__(
        self,
        config: Config,
        *,
        env: Mapping[str, str] | None = None,
        factory: BackendFactory | None = None,
        remote_names: list[str] | None = None,
        start: Start | None = None,
        last_frame: Spec | None = None,
    ) -> None:
        """``start``: the remotes (and their first listings) the ``corral`` command
        resolved before importing the UI; without it, resolved here from ``config``.
        ``last_frame``: where the screen is kept at quit for the next start to paint
        first (``tui/lastframe.py``; the ``corral`` command's, not the tests')."""
        super().__init__()
        self.config = config
        self.env = dict(env if env is not None else os.environ)
        if start is None:
            start = resolve(config, self.env, remote_names)
        self.store = start.store
        remotes = start.remotes
        self.remotes = remotes
        self.problems = start.problems
        self.looked_in = start.looked_in
        for problem in self.problems:
            logging.getLogger("corral.config").warning("%s", problem)
        if factory is None:
            factory = backend_factory(config.backend_options)
        self.inventory = Inventory(remotes, on_change=self._inventory_changed,
                                   timeout=config.network_timeout,
                                   first_listings=start.first_listings, factory=factory)
        self.main_screen: MainScreen | None = None
        self._cache: InventoryCache | None = None
        self._cache_dirty: set[str] = set()
        self._cache_saving = False
        self._cache_unsaved = False
        self._frozen = False
        self._freeze_quiet: Timer | None = None
        self._freeze_timer: Timer | None = None
        self._last_frame = last_frame
        self._remote_changed: dict[str, asyncio.Event] = {}
        self.keys = KeyGate(self, notify=lambda text: self.notify(text, severity="warning"))
        """Every key in order, each after the one before has settled (tui/keyboard.py)."""
        self.inventory.take_first_listings()  # those in already: rows of the first frame
        self.inventory.first_frame = asyncio.Event()  # set by MainScreen once painted
        self.inventory.keys_handled = self.keys.typed_ahead  # the user's keys go first
        if config.warm_start:
            self._cache = InventoryCache(cache_path(env if env is not None else os.environ,
                                                    config.path))
            for name, cached in self._cache.load(remotes).items():
                self.inventory.seed(name, cached.instances)
                self.inventory.statuses[name].cached_at = cached.saved_at

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
            for key in self.keys.unalt(event):  # (Esc N in one read: Esc, then N)
                if self.keys.admit(key) and compat.has_screens(self):  # (none: quitting)
                    await super().on_event(key)
                    self.keys.dispatched(key)
            return
        await super().on_event(event)

    async def remote_settled(self, name: str | None) -> None:
        """Until remote ``name`` has stopped connecting (connected, failed or gone)."""
        while (st := self.inventory.statuses.get(name or "")) is not None \
                and st.state is ConnectionState.CONNECTING:
            await self._remote_changed.setdefault(st.remote.name, asyncio.Event()).wait()

    def _inventory_changed(self, remote: str, refs) -> None:
        changed = self._remote_changed.pop(remote, None)
        if changed is not None:
            changed.set()  # whoever waits for this remote looks again
        if self.main_screen is not None:
            self.main_screen.inventory_changed(remote, refs)
            if not self._frozen and self._startup_settled():
                # each change starts the quiet again: the listings after connecting, and
                # their rows, come first
                if self._freeze_quiet is None:
                    self._freeze_quiet = self.set_timer(FREEZE_QUIET,
                                                        self._freeze_startup_objects)
                else:
                    self._freeze_quiet.reset()
        status = self.inventory.statuses.get(remote)  # none yet for a remote being added
        if self._cache is not None and status is not None and status.listed:
            self._cache_dirty.add(remote)
            if not self._cache_saving:
                self._cache_saving = True
                self.set_timer(CACHE_DELAY, self._save_cache)

    def _update_cache(self) -> bool:
        """Rows of the remotes that changed into the cache; True when some row differs
        from what the file holds (each usage sample changes rows, not what is kept)."""
        cache = self._cache
        if cache is None or not self._cache_dirty:
            return False
        changed = False
        for name in self._cache_dirty:
            if name in self.inventory.remotes:  # not removed meanwhile
                changed |= cache.update(self.inventory.remotes[name],
                                        self.inventory.instances_of(name))
        self._cache_dirty.clear()
        changed |= cache.forget_except(self.inventory.remotes)
        self._cache_unsaved = True  # (the listings' times, written on the way out)
        return changed

    async def _save_cache(self) -> None:
        """Keep the last inventory for the next start (a few seconds after changes)."""
        try:
            if self._update_cache():
                await asyncio.to_thread(self._write_cache)
        finally:
            self._cache_saving = False

    def _write_cache(self) -> None:
        assert self._cache is not None
        self._cache_unsaved = False
        try:
            self._cache.write()
        except OSError as e:
            log.warning("could not save the inventory cache %s: %s", self._cache.path, e)

    def on_load(self) -> None:
        # No thread this loop hands work to (asyncio.to_thread, subprocesses) makes it
        # wait until that thread has run (backends/threads.py).
        threads.use_on(asyncio.get_running_loop())
        # The theme before anything is styled: set once the screen is mounted, it parsed
        # every style again and restyled every widget (~40 ms before the first frame).
        for theme in BUILTIN_THEMES:
            self.register_theme(theme)
        known = self.config.theme in self.available_themes
        self.theme = self.config.theme if known else "corral-dark"
        # Connect to every remote at once, while Textual is still starting up (with or
        # without rows from the last run): the daemons answer meanwhile. With rows to
        # paint, the backends are imported in threads (tui/services/inventory.py); without
        # any (and no first listing under way, whose rows would wait for the import),
        # before the first frame: there is nothing to show yet, and an import racing the
        # first frames only delays the listings (measured: every row ~0.2 s later).
        if not self.inventory.instances and not self.inventory.first_listings_pending:
            for kind in {r.kind for r in self.inventory.remotes.values()}:
                try:
                    preload(kind)
                except BackendError:
                    pass  # the factory says what is wrong
        self._connect_remotes()

    def _connect_remotes(self) -> None:
        for name in self.inventory.remotes:
            self.run_worker(self.inventory.run_remote(name), group=f"remote:{name}",
                            exclusive=True, exit_on_error=False,
                            description=f"Follow remote {name}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A background job failed unexpectedly: say so instead of failing silently."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            logging.getLogger("corral").error("%s failed", event.worker.description,
                                              exc_info=error)
            self.notify(f"{event.worker.description}: {error}", title="Unexpected error",
                        severity="error", timeout=15)
            group = event.worker.group
            if group.startswith("remote:"):
                name = group.split(":", 1)[1]
                if name in self.inventory.statuses:
                    st = self.inventory.statuses[name]
                    st.state, st.message = ConnectionState.ERROR, f"internal error: {error}"
                    self._inventory_changed(name, None)

    async def on_unmount(self) -> None:
        gc.unfreeze()  # what this app froze can be collected once it is gone
        self._update_cache()
        if self._cache_unsaved:
            self._write_cache()  # small, and the loop is ending anyway
        await self.inventory.close()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification is plain text (screens and widgets reach this too, with
        Textual's ``markup=True`` default): its words come from daemons, guests and users,
        and a ``[`` in them must neither crash corral nor make a link, nor a control
        character reach the terminal (the one text gate, ``tui/format.py``)."""
        from .format import printable

        super().notify(printable(message, lines=True), title=printable(title),
                       severity=severity, timeout=timeout, markup=False)

    def get_driver_class(self):
        """Textual's Linux driver with an input thread that sleeps while there is no
        input (tui/driver.py); whatever ``TEXTUAL_DRIVER`` names, elsewhere."""
        from textual import constants

        if constants.DRIVER is None and sys.platform.startswith("linux"):
            from .driver import QuietLinuxDriver

            return QuietLinuxDriver
        return super().get_driver_class()

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(DEFAULT_VARIABLES)

    def on_mount(self) -> None:
        if not self.is_headless:  # a vanished terminal ends corral (tui/hangup.py)
            from .hangup import watch_hangup

            watch_hangup(self)
        if self.config.theme not in self.available_themes:
            self.notify(f"Unknown theme '{self.config.theme}'; using corral-dark.",
                        severity="warning")
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        self.main_screen = MainScreen(
            self.inventory,
            problems=self.problems,
            metrics_interval=self.config.metrics_interval,
            settings=Settings(stop_timeout=self.config.stop_timeout,
                              shell=tuple(self.config.shell),
                              detach_key=self.config.detach_key,
                              graphics=self.config.graphics,
                              screen_fps=self.config.screen_fps,
                              screenshot_dir=self.config.screenshot_dir),
            record_dir=self.config.record_dir,
            looked_in=self.looked_in,
            config_path=str(self.config.path),
        )
        self.push_screen(self.main_screen)
        # Textual's widgets are long-lived: move them out of the cyclic GC's way, so a
        # full collection during a console flood does not stall a frame (~20-40 ms).
        # Once every remote is connected and listed: the collection before the freeze takes
        # 80-400 ms, which must be neither on the way to the first full table (a fixed
        # delay was: a slow machine lists after it) nor hold up the remotes that connect
        # after their first listing (it did: a remote shown "connecting" 0.4 s longer).
        self._freeze_timer = self.set_timer(FREEZE_LATEST, self._freeze_startup_objects)

    def _startup_settled(self) -> bool:
        """Every remote is connected and has listed in this run, or is known not to connect
        (failed): none is still connecting."""
        return all(st.listed if st.state is ConnectionState.CONNECTED
                   else st.state is not ConnectionState.CONNECTING
                   for st in self.inventory.statuses.values())

    def _freeze_startup_objects(self) -> None:
        if self._frozen:
            return
        self._frozen = True
        if self._freeze_timer is not None:
            self._freeze_timer.stop()
        gc.collect()  # what is garbage now must not become permanent
        gc.freeze()
        gc.enable()  # off since the start (tui/cli.py)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("quit", "help"):
            from .widgets.view_messages import ConsoleView

            if isinstance(self.focused, ConsoleView):
                return False  # q and ? belong to the console (text or graphical) it has
        return True

    async def action_quit(self) -> None:
        self._keep_last_frame()
        await super().action_quit()

    def _keep_last_frame(self) -> None:
        """The main screen as it is, for the next start (another screen on top: none)."""
        spec = self._last_frame
        if spec is None or self.is_headless:
            return
        try:
            if not self.config.warm_start or self.screen is not self.main_screen:
                spec.forget()
                return
            frame = self._honest_frame().render_segments(self.console)
            spec.save(self.size.width, self.size.height, frame)
        except Exception as e:  # private compositor parts: quit anyway
            log.warning("could not keep the last frame: %s", e)

    def _honest_frame(self):
        """The main screen's full render with nothing in it that reads as live: every
        remote's state says ``last run`` and the footer offers no key (keys come with
        the live screen, which takes what is typed meanwhile)."""
        from rich.segment import Segment
        from textual.strip import Strip

        from ._textual_compat import full_frame
        from .widgets.footer import FittingFooter
        from .widgets.remote_list import RemoteList

        screen = self.screen
        remotes = screen.query_one(RemoteList)
        remotes.last_run = True
        remotes.sync(self.inventory)
        update = full_frame(screen)
        footer = screen.query_one(FittingFooter).region
        note = " last run · keys work as soon as corral is up "
        for y in range(footer.y, footer.bottom):
            row = y - update.region.y
            if 0 <= row < len(update.strips):
                text = note if y == footer.y else ""
                update.strips[row] = [Strip([Segment(text.ljust(footer.width)[:footer.width],
                                                     self.console.get_style("dim"))])]
        return update

    def action_help(self) -> None:
        screen = self.screen
        if isinstance(screen, MainScreen):
            screen.action_help()


def make_app(
    config_path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    factory: BackendFactory | None = None,
    theme: str | None = None,
    remote_names: list[str] | None = None,
) -> CorralApp:
    """Build the app exactly as the ``corral`` command does."""
    config = load_config(config_path)
    if theme:
        from dataclasses import replace

        config = replace(config, theme=theme)
    return CorralApp(config, env=env, factory=factory, remote_names=remote_names)
