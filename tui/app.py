"""The corral application and the factory the CLI and the tests share."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path
from typing import Mapping

from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

from backends import Backend, Remote, get_backend
from backends.remotes import ConfigProblem, discover
from themes import BUILTIN_THEMES, DEFAULT_VARIABLES, STYLESHEET

from .commands import InstanceCommands
from .config import Config, load_config
from .screens.main import MainScreen
from .services.inventory import BackendFactory, Inventory


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
    ) -> None:
        super().__init__()
        self.config = config
        found = discover(
            env if env is not None else os.environ,
            extra=config.remotes,
            extra_source=str(config.path),
            read_only=config.read_only_remotes,
            hidden=config.hide_remotes,
        )
        remotes = found.remotes
        if config.qemu_enabled and shutil.which("qemu-system-x86_64"):
            from backends.qemu import qemu_remote

            if "qemu" not in config.hide_remotes:
                remotes.append(qemu_remote(config.qemu_path or None))
        if config.lxc_enabled:
            from backends.lxc import lxc_remotes

            remotes += [r for r in lxc_remotes(config.lxc_paths)
                        if r.name not in config.hide_remotes]
        if remote_names:
            unknown = [n for n in remote_names if n not in {r.name for r in remotes}]
            remotes = [r for r in remotes if r.name in remote_names]
            if unknown:
                known = ", ".join(r.name for r in found.remotes) or "none"
                found.problems.append(ConfigProblem(
                    "--remote", f"no remote named {', '.join(unknown)} (known: {known})"))
        self.remotes = remotes
        self.problems = [str(p) for p in found.problems] + list(config.problems)
        if not remotes and not self.problems:
            self.problems.append(
                "No LXD or Incus remotes found. Add one with `lxc remote add` or "
                f"`incus remote add`, or under [[remote]] in {config.path}."
            )
        if factory is None:
            def factory(remote: Remote, timeout: float) -> Backend:
                options = {"default_accel": config.qemu_accel} if remote.kind == "qemu" else {}
                return get_backend(remote, timeout=timeout, **options)
        kwargs = {"factory": factory}
        self.inventory = Inventory(remotes, on_change=self._inventory_changed,
                                   timeout=config.network_timeout, **kwargs)
        self.main_screen: MainScreen | None = None

    def _inventory_changed(self, remote: str, refs) -> None:
        if self.main_screen is not None:
            self.main_screen.inventory_changed(remote, refs)

    def on_load(self) -> None:
        # Connect to every remote at once, while Textual is still starting up.
        for name in self.inventory.remotes:
            self.run_worker(self.inventory.run_remote(name), group=f"remote:{name}",
                            exclusive=True, exit_on_error=False,
                            description=f"Follow remote {name}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A background job failed unexpectedly: say so instead of failing silently."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.description}: {error}", title="Unexpected error",
                        severity="error", timeout=15)
            group = event.worker.group
            if group.startswith("remote:"):
                from backends.models import ConnectionState

                name = group.split(":", 1)[1]
                if name in self.inventory.statuses:
                    st = self.inventory.statuses[name]
                    st.state, st.message = ConnectionState.ERROR, f"internal error: {error}"
                    self._inventory_changed(name, None)

    async def on_unmount(self) -> None:
        await self.inventory.close()

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(DEFAULT_VARIABLES)

    def on_mount(self) -> None:
        for theme in BUILTIN_THEMES:
            self.register_theme(theme)
        if self.config.theme in self.available_themes:
            self.theme = self.config.theme
        else:
            self.theme = "corral-dark"
            self.notify(f"Unknown theme '{self.config.theme}'; using corral-dark.",
                        severity="warning")
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        self.main_screen = MainScreen(
            self.inventory,
            problems=self.problems,
            metrics_interval=self.config.metrics_interval,
            stop_timeout=self.config.stop_timeout,
            detach_key=self.config.detach_key,
            shell=self.config.shell,
            record_dir=self.config.record_dir,
            screen={"graphics": self.config.graphics, "screen_fps": self.config.screen_fps,
                    "screenshot_dir": self.config.screenshot_dir},
        )
        self.push_screen(self.main_screen)
        # Textual's widgets are long-lived: move them out of the cyclic GC's way, so a
        # full collection during a console flood does not stall a frame (~20-40 ms).
        self.call_after_refresh(self._freeze_startup_objects)

    @staticmethod
    def _freeze_startup_objects() -> None:
        gc.collect()
        gc.freeze()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("quit", "help"):
            from .widgets.terminal import TerminalView

            if isinstance(self.focused, TerminalView):
                return False  # q and ? belong to the console while it has the focus
        return True

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
