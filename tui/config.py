"""corral's own configuration: ``config.toml`` (standard library only).

```toml
[ui]
theme = "corral-dark"      # or corral-light, or any Textual theme
metrics_interval = 10      # seconds between CPU/memory samples of visible running rows
stop_timeout = 30          # graceful stop before force is offered
network_timeout = 10       # seconds before a remote counts as not responding

[keymap]                   # binding id = keys
"instance.stop" = "s"

[remotes]
hide = ["images"]
read_only = ["prod"]

[qemu]                     # local QEMU VMs (no daemon)
enabled = true
path = "~/.local/share/corral/qemu"
accel = "auto"             # kvm, tcg, or auto (KVM when /dev/kvm is usable)

[lxc]                      # local LXC containers (lxc-* tools)
enabled = true
paths = ["/var/lib/lxc"]   # lxcpaths; default: the tools' default for this user

[[remote]]                 # extra LXD/Incus remotes beside the lxc/incus CLI ones
name = "lab"
kind = "lxd"               # or incus
address = "https://10.0.0.5:8443"
client_cert = "~/.config/lxc/client.crt"
client_key = "~/.config/lxc/client.key"
server_cert = "~/lab.crt"
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .locations import config_file


@dataclass(frozen=True)
class Config:
    path: Path
    theme: str = "corral-dark"
    metrics_interval: float = 10.0
    stop_timeout: int = 30
    network_timeout: float = 10.0
    keymap: dict[str, str] = field(default_factory=dict)
    hide_remotes: tuple[str, ...] = ()
    read_only_remotes: tuple[str, ...] = ()
    remotes: tuple[dict[str, Any], ...] = ()
    qemu_enabled: bool = True
    qemu_path: str = ""
    """Where VM definitions and disks live (default: $XDG_DATA_HOME/corral/qemu)."""
    qemu_accel: str = "auto"
    """Default accelerator of VMs set to 'auto': auto (KVM when usable), kvm or tcg."""
    lxc_enabled: bool = True
    lxc_paths: tuple[str, ...] = ()
    """lxcpaths to show (default: the lxc tools' own default)."""
    problems: tuple[str, ...] = ()
    """Why (part of) the file was ignored, in words."""


def _num(section: dict[str, Any], key: str, default: float, problems: list[str],
         path: Path, *, minimum: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        problems.append(f"{path}: [ui] {key} must be a number >= {minimum:g}; using {default:g}")
        return default
    return float(value)


def load_config(path: Path | None = None) -> Config:
    """Read the config; a missing file gives defaults, a broken one gives defaults plus a
    problem naming the file and the line."""
    path = path or config_file()
    problems: list[str] = []
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return Config(path=path)
    except tomllib.TOMLDecodeError as e:
        return Config(path=path, problems=(f"{path}: not valid TOML ({e}); using defaults",))
    except OSError as e:
        return Config(path=path, problems=(f"{path}: cannot be read ({e.strerror})",))
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
    accel = str(qemu.get("accel", "auto"))
    if accel not in ("auto", "kvm", "tcg"):
        problems.append(f"{path}: [qemu] accel must be auto, kvm or tcg; using auto")
        accel = "auto"
    extra = data.get("remote") or []
    if not isinstance(extra, list):
        problems.append(f"{path}: [[remote]] entries must be tables")
        extra = []
    return Config(
        path=path,
        theme=str(ui.get("theme", "corral-dark")),
        metrics_interval=_num(ui, "metrics_interval", 10.0, problems, path, minimum=1),
        stop_timeout=int(_num(ui, "stop_timeout", 30, problems, path, minimum=1)),
        network_timeout=_num(ui, "network_timeout", 10.0, problems, path, minimum=0.5),
        keymap=keymap,
        hide_remotes=names(remotes_section, "hide"),
        read_only_remotes=names(remotes_section, "read_only"),
        remotes=tuple(e for e in extra if isinstance(e, dict)),
        qemu_enabled=bool(qemu.get("enabled", True)),
        qemu_path=str(qemu.get("path") or ""),
        qemu_accel=accel,
        lxc_enabled=bool(lxc.get("enabled", True)),
        lxc_paths=names(lxc, "paths"),
        problems=tuple(problems),
    )
