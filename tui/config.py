"""corral's own configuration: ``config.toml`` (standard library and
:mod:`backends.paths` only: read only when it is this user's own file).

```toml
[ui]
theme = "corral-dark"      # or corral-light, or any Textual theme
metrics_interval = 10      # seconds between CPU/memory samples of visible running rows
stop_timeout = 30          # graceful stop before force is offered
network_timeout = 10       # seconds before a remote counts as not responding
warm_start = true          # the last screen at once, then the last run's rows (marked stale) until remotes answer

[keymap]                   # binding id = keys
"instance.stop" = "s"

[remotes]
hide = ["images"]
read_only = ["prod"]

[qemu]                     # local QEMU VMs (no daemon)
enabled = true
path = "~/.local/share/corral/qemu"
accel = "auto"             # kvm, tcg, or auto (KVM when /dev/kvm is usable)
serial_log_mib = 4         # a VM's serial log is trimmed past this (the last MiB kept)

[lxc]                      # local LXC containers (lxc-* tools)
enabled = true
paths = ["/var/lib/lxc"]   # lxcpaths; default: the tools' default for this user

[console]
detach_key = "ctrl+]"      # leaves a console (it keeps running); not ctrl+a/ctrl+b
shell = ["/bin/bash"]      # the exec shell's command (default: bash if present, else sh)
record_dir = "~/corral-casts"  # when set, every console is recorded as asciicast v2
graphics = "auto"          # a VM's graphical screen: auto, kitty, sixel or halfblock
screen_fps = 10            # most repaints a second of a changing graphical screen
screenshot_dir = "~/corral-screenshots"  # where screenshots (PNG) of a screen go

[[remote]]                 # extra LXD/Incus remotes beside the lxc/incus CLI ones
name = "lab"
kind = "lxd"               # or incus
address = "https://10.0.0.5:8443"
client_cert = "~/.config/lxc/client.crt"
client_key = "~/.config/lxc/client.key"
server_cert = "~/lab.crt"

[[remote]]                 # a libvirt connection (virt-manager's hosts)
name = "server"
kind = "libvirt"
uri = "qemu+ssh://root@server/system?keyfile=~/.ssh/id_ed25519&known_hosts=~/.ssh/known_hosts"
```
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.paths import UntrustedFile, read_owned

from .locations import config_file


@dataclass(frozen=True)
class Config:
    path: Path
    theme: str = "corral-dark"
    metrics_interval: float = 10.0
    stop_timeout: int = 30
    network_timeout: float = 10.0
    warm_start: bool = True
    """Paint the last inventory from the cache at start, until the remotes answer."""
    keymap: dict[str, str] = field(default_factory=dict)
    hide_remotes: tuple[str, ...] = ()
    read_only_remotes: tuple[str, ...] = ()
    remotes: tuple[dict[str, Any], ...] = ()
    qemu_enabled: bool = True
    qemu_path: str = ""
    """Where VM definitions and disks live (default: $XDG_DATA_HOME/corral/qemu)."""
    qemu_accel: str = "auto"
    """Default accelerator of VMs set to 'auto': auto (KVM when usable), kvm or tcg."""
    qemu_serial_log_mib: float = 4
    """MiB a VM's serial log may reach before it is trimmed."""

    def backend_options(self, kind: str) -> dict[str, Any]:
        """The keyword arguments a backend of ``kind`` is made with, from its own table
        of the config file (the UI passes them on without knowing them)."""
        return dict(self._backend_options.get(kind, {}))

    @property
    def _backend_options(self) -> dict[str, dict[str, Any]]:
        return {"qemu": {"default_accel": self.qemu_accel,
                         "serial_log_max": int(self.qemu_serial_log_mib * (1 << 20))}}
    lxc_enabled: bool = True
    lxc_paths: tuple[str, ...] = ()
    """lxcpaths to show (default: the lxc tools' own default)."""
    detach_key: str = "ctrl+right_square_bracket"
    """Textual key name that detaches from a console."""
    shell: tuple[str, ...] = ()
    """The exec shell's command; empty: bash when the instance has it, else sh."""
    record_dir: str = ""
    """When set, consoles are recorded there as asciicast v2 files."""
    graphics: str = "auto"
    """How a VM's graphical screen is drawn: auto (ask the terminal), kitty, sixel or
    halfblock (Unicode half-blocks: everywhere, tmux and SSH included)."""
    screen_fps: float = 10.0
    """Most repaints a second of a changing graphical screen."""
    screenshot_dir: str = "~/corral-screenshots"
    """Where screenshots of a graphical screen are saved (PNG)."""
    problems: tuple[str, ...] = ()
    """Why (part of) the file was ignored, in words."""


_KEY_NAMES = {"]": "right_square_bracket", "[": "left_square_bracket", "\\": "backslash",
              "^": "circumflex_accent", "_": "underscore", "@": "at", " ": "space"}
_RESERVED_DETACH = {"ctrl+a": "screen's prefix", "ctrl+b": "tmux's prefix",
                    "ctrl+c": "the guest's interrupt", "ctrl+d": "the guest's end of input"}


def detach_key_name(text: str) -> tuple[str, str | None]:
    """``"ctrl+]"`` → Textual's ``"ctrl+right_square_bracket"``; with a problem when the
    key would clash with tmux, screen or the guest."""
    parts = [_KEY_NAMES.get(p, p) for p in text.strip().lower().split("+")]
    key = "+".join(parts)
    for reserved, why in _RESERVED_DETACH.items():
        if key == reserved:
            return "ctrl+right_square_bracket", (
                f"detach_key {text!r} is {why}; using ctrl+]")
    if len(parts) == 1 and len(parts[0]) == 1:
        return "ctrl+right_square_bracket", (
            f"detach_key {text!r} is a plain key the guest needs; using ctrl+]")
    return key, None


def _num(section: dict[str, Any], key: str, default: float, problems: list[str],
         path: Path, *, minimum: float, maximum: float, table: str = "ui") -> float:
    """A finite number within bounds (TOML also has ``nan`` and ``inf``); else the default,
    with a problem naming the file, the table and the key."""
    value = section.get(key, default)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not minimum <= value <= maximum):
        problems.append(f"{path}: [{table}] {key} = {value!r} is not a number from "
                        f"{minimum:g} to {maximum:g}; using {default:g}")
        return default
    return float(value)


def _flag(section: dict[str, Any], key: str, default: bool, problems: list[str], path: Path,
          table: str) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        problems.append(f"{path}: [{table}] {key} = {value!r} is not true or false; "
                        f"using {str(default).lower()}")
        return default
    return value


def _text(section: dict[str, Any], key: str, default: str, problems: list[str], path: Path,
          table: str) -> str:
    value = section.get(key, default)
    if not isinstance(value, str) or any(ord(c) < 32 or ord(c) == 127 for c in value):
        problems.append(f"{path}: [{table}] {key} = {value!r} is not a line of text; "
                        f"using {default!r}")
        return default
    return value


def load_config(path: Path | None = None) -> Config:
    """Read the config; a missing file gives defaults, a broken one (or one that is not
    this user's own: :func:`~backends.paths.read_owned`) gives defaults plus a problem
    naming the file and the line (or what is wrong with it)."""
    path = path or config_file()
    data = _read_toml(path)
    return data if isinstance(data, Config) else _from_toml(data, path)


def _read_toml(path: Path) -> dict[str, Any] | Config:
    """The file's tables, or the defaults with the reason it could not be read."""
    try:
        return tomllib.loads(read_owned(path).decode())
    except FileNotFoundError:
        return Config(path=path)
    except UntrustedFile as e:
        return Config(path=path, problems=(f"{e.message} Using the defaults.",))
    except tomllib.TOMLDecodeError as e:
        return Config(path=path, problems=(f"{path}: not valid TOML ({e}); using defaults",))
    except UnicodeDecodeError:
        return Config(path=path, problems=(f"{path}: not UTF-8 text; using defaults",))
    except OSError as e:
        return Config(path=path, problems=(f"{path}: cannot be read ({e.strerror})",))


def _from_toml(data: dict[str, Any], path: Path) -> Config:
    problems: list[str] = []

    def table(name: str) -> dict[str, Any]:
        value = data.get(name) or {}
        if not isinstance(value, dict):
            problems.append(f"{path}: [{name}] must be a table; ignored")
            return {}
        return value

    def names(section: dict[str, Any], key: str) -> tuple[str, ...]:
        value = section.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            problems.append(f"{path}: {key} must be a list of names; ignored")
            return ()
        return tuple(str(v) for v in value)

    ui = table("ui")
    keymap = {str(k): str(v) for k, v in table("keymap").items()}
    remotes_section = data.get("remotes") or {}
    if isinstance(remotes_section, list):
        problems.append(f"{path}: extra remotes are [[remote]] tables (singular); "
                        f"[[remotes]] was ignored")
        remotes_section = {}
    elif not isinstance(remotes_section, dict):
        problems.append(f"{path}: [remotes] must be a table; ignored")
        remotes_section = {}
    lxc = table("lxc")
    qemu = table("qemu")
    accel = _text(qemu, "accel", "auto", problems, path, "qemu")
    if accel not in ("auto", "kvm", "tcg"):
        problems.append(f"{path}: [qemu] accel must be auto, kvm or tcg; using auto")
        accel = "auto"
    console = _console(table("console"), problems, path)
    extra = data.get("remote") or []
    if not isinstance(extra, list):
        problems.append(f"{path}: [[remote]] entries must be tables")
        extra = []
    return Config(
        path=path,
        theme=_text(ui, "theme", "corral-dark", problems, path, "ui"),
        metrics_interval=_num(ui, "metrics_interval", 10.0, problems, path, minimum=1,
                              maximum=86400),
        stop_timeout=int(_num(ui, "stop_timeout", 30, problems, path, minimum=1,
                              maximum=86400)),
        network_timeout=_num(ui, "network_timeout", 10.0, problems, path, minimum=0.5,
                             maximum=3600),
        warm_start=_flag(ui, "warm_start", True, problems, path, "ui"),
        keymap=keymap,
        hide_remotes=names(remotes_section, "hide"),
        read_only_remotes=names(remotes_section, "read_only"),
        remotes=tuple(e for e in extra if isinstance(e, dict)),
        qemu_enabled=_flag(qemu, "enabled", True, problems, path, "qemu"),
        qemu_path=_text(qemu, "path", "", problems, path, "qemu"),
        qemu_accel=accel,
        qemu_serial_log_mib=_num(qemu, "serial_log_mib", 4, problems, path, minimum=1,
                                 maximum=4096, table="qemu"),
        lxc_enabled=_flag(lxc, "enabled", True, problems, path, "lxc"),
        lxc_paths=names(lxc, "paths"),
        **console,
        problems=tuple(problems),
    )


def _console(console: dict[str, Any], problems: list[str], path: Path) -> dict[str, Any]:
    """The [console] table's settings, as :class:`Config`'s keyword arguments."""
    detach, problem = detach_key_name(_text(console, "detach_key", "ctrl+]", problems, path,
                                            "console"))
    if problem:
        problems.append(f"{path}: [console] {problem}")
    shell = console.get("shell") or []
    if isinstance(shell, str):
        shell = shell.split()
    if not isinstance(shell, list) or not all(isinstance(a, str) for a in shell):
        problems.append(f"{path}: [console] shell must be a command as a list of strings")
        shell = []
    graphics = str(console.get("graphics", "auto"))
    if graphics not in ("auto", "kitty", "sixel", "halfblock"):
        problems.append(f"{path}: [console] graphics must be auto, kitty, sixel or "
                        f"halfblock; using auto")
        graphics = "auto"
    return {
        "detach_key": detach,
        "shell": tuple(shell),
        "record_dir": _text(console, "record_dir", "", problems, path, "console"),
        "graphics": graphics,
        "screen_fps": _num(console, "screen_fps", 10.0, problems, path, minimum=1,
                           maximum=60, table="console"),
        "screenshot_dir": _text(console, "screenshot_dir", "~/corral-screenshots", problems,
                                path, "console"),
    }
