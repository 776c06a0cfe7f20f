"""Read LXD and Incus remotes from the ``lxc`` / ``incus`` CLI configs, read-only, and the
libvirt connections of this host (``qemu:///system`` when its socket is there, the
``uri_aliases`` of ``~/.config/libvirt/libvirt.conf``).

The files are read exactly as those tools write them (the README's "Configuration" lists every path): ``config.yml``
beside ``client.crt``/``client.key``, pinned server certificates in ``servercerts/``, Incus
per-remote client certificates in ``clientcerts/``. Public and simplestreams/OCI remotes
are image sources, not inventory. A malformed file is reported as a
:class:`ConfigProblem` naming the file, and every other remote still loads. Nothing here
ever writes these files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from .models import Remote
from .paths import check_owned


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """A configuration file that could not be used, in words."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class ImageSource:
    """A public / simplestreams / OCI remote: somewhere to take images from."""

    name: str
    kind: str
    address: str
    protocol: str
    source: str


@dataclass(slots=True)
class Discovery:
    """Everything found: inventory remotes, image sources and problems."""

    remotes: list[Remote] = field(default_factory=list)
    image_sources: list[ImageSource] = field(default_factory=list)
    problems: list[ConfigProblem] = field(default_factory=list)
    looked_in: list[str] = field(default_factory=list)
    """Every file and socket that was looked for, for the "no remotes" message."""


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _user_config_dir(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else _home(env) / ".config"


def lxd_socket_path(env: Mapping[str, str]) -> str:
    """The socket ``unix://`` means for the ``lxc`` CLI (lxd client/connection.go)."""
    if env.get("LXD_SOCKET"):
        return env["LXD_SOCKET"]
    if env.get("LXD_DIR"):
        return os.path.join(env["LXD_DIR"], "unix.socket")
    snap = "/var/snap/lxd/common/lxd/unix.socket"
    if os.access(snap, os.W_OK):
        return snap
    return "/var/lib/lxd/unix.socket"


def incus_socket_path(env: Mapping[str, str]) -> str:
    """The socket ``unix://`` means for the ``incus`` CLI (incus client/connection.go)."""
    if env.get("INCUS_SOCKET"):
        return env["INCUS_SOCKET"]
    if env.get("INCUS_DIR"):
        return os.path.join(env["INCUS_DIR"], "unix.socket")
    if os.path.exists("/run/incus/unix.socket"):
        return "/run/incus/unix.socket"
    return "/var/lib/incus/unix.socket"


def _load_yaml(path: Path, problems: list[ConfigProblem]) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        problems.append(ConfigProblem(str(path), f"cannot be read: {e.strerror or e}"))
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        where = ""
        if e.problem_mark is not None:
            where = f"line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1}: "
        problems.append(
            ConfigProblem(str(path), f"is not valid YAML ({where}{e.problem or e.context})")
        )
        return None
    except yaml.YAMLError as e:
        problems.append(ConfigProblem(str(path), f"is not valid YAML ({e})"))
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(
            ConfigProblem(str(path), "should be a mapping with a 'remotes:' section")
        )
        return None
    remotes = data.get("remotes")
    if remotes is not None and not isinstance(remotes, dict):
        problems.append(ConfigProblem(str(path), "'remotes' should be a mapping of names"))
        return None
    return data


def _existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


def _read_cli(
    flavour: str,
    conf_dir: Path,
    global_dir: Path | None,
    env: Mapping[str, str],
    out: Discovery,
    *,
    is_global: bool = False,
    user_dir: Path | None = None,
) -> dict[str, Remote] | None:
    """Read one ``config.yml``. Returns ``None`` when the file does not exist."""
    path = conf_dir / "config.yml"
    data = _load_yaml(path, out.problems)
    if data is None:
        return None if not path.exists() else {}
    found: dict[str, Remote] = {}
    default_proto = "lxd" if flavour == "lxd" else "incus"
    certs_dir = user_dir or conf_dir  # global remotes use the user's client certificate
    for name, spec in (data.get("remotes") or {}).items():
        name = str(name)
        if not isinstance(spec, dict):
            out.problems.append(ConfigProblem(str(path), f"remote '{name}' is not a mapping"))
            continue
        addr = str(spec.get("addr") or "")
        protocol = str(spec.get("protocol") or default_proto)
        public = bool(spec.get("public", False))
        if public or protocol in ("simplestreams", "oci"):
            out.image_sources.append(ImageSource(name, flavour, addr, protocol, str(path)))
            continue
        if not addr:
            out.problems.append(ConfigProblem(str(path), f"remote '{name}' has no 'addr'"))
            continue
        project = str(spec.get("project") or "default")
        problem = None
        auth = str(spec.get("auth_type") or "tls")
        addresses = tuple(a.strip() for a in addr.split(",") if a.strip())
        if not addresses:
            out.problems.append(ConfigProblem(str(path), f"remote '{name}' has no address"))
            continue
        first = addresses[0]
        if first.startswith("unix:"):
            sock = first[len("unix://"):] if first.startswith("unix://") else first[5:]
            if not sock:
                sock = lxd_socket_path(env) if flavour == "lxd" else incus_socket_path(env)
            found[name] = Remote(
                name=name, kind=flavour, address=f"unix://{sock}", project=project,
                source=str(path), addresses=(f"unix://{sock}",),
            )
            continue
        if auth != "tls":
            problem = f"authentication '{auth}' is not supported by corral (only TLS)"
        cert = key = None
        if flavour == "incus":
            cert = _existing(certs_dir / "clientcerts" / f"{name}.crt")
            key = _existing(certs_dir / "clientcerts" / f"{name}.key")
        if cert is None or key is None:
            cert = _existing(certs_dir / "client.crt")
            key = _existing(certs_dir / "client.key")
        server_cert = _existing(conf_dir / "servercerts" / f"{name}.crt")
        found[name] = Remote(
            name=name, kind=flavour, address=first, project=project,
            client_cert=cert, client_key=key, server_cert=server_cert,
            source=str(path), addresses=addresses, problem=problem,
        )
    return found


def _flavour(
    flavour: str,
    env: Mapping[str, str],
    out: Discovery,
) -> dict[str, Remote]:
    if flavour == "lxd":
        if env.get("LXD_CONF"):
            user_dirs = [Path(env["LXD_CONF"])]
        else:
            # lxc uses $HOME/.config/lxc whatever XDG_CONFIG_HOME says (lxc/main.go)
            user_dirs = [_home(env) / ".config/lxc", _home(env) / "snap/lxd/common/config"]
        global_dir = Path(env.get("LXD_GLOBAL_CONF") or "/etc/lxd")
        socket = lxd_socket_path(env)
    else:
        user_dirs = [Path(env["INCUS_CONF"])] if env.get("INCUS_CONF") else [
            _user_config_dir(env) / "incus"
        ]
        global_dir = Path(env.get("INCUS_GLOBAL_CONF") or "/etc/incus")
        socket = incus_socket_path(env)

    remotes: dict[str, Remote] = {}
    any_file = False
    out.looked_in += [str(d / "config.yml") for d in user_dirs]
    out.looked_in += [str(global_dir / "config.yml"), socket]
    for d in user_dirs:
        got = _read_cli(flavour, d, global_dir, env, out)
        if got is None:
            continue
        any_file = True
        for name, r in got.items():
            remotes.setdefault(name, r)
    got = _read_cli(
        flavour, global_dir, None, env, out, is_global=True,
        user_dir=next((d for d in user_dirs if d.exists()), user_dirs[0]),
    )
    if got is not None:
        any_file = True
        for name, r in got.items():
            remotes.setdefault(name, r)
    # The static 'local' remote is always there for the CLI; corral shows it when the user
    # uses that CLI at all (a config file exists) or a daemon socket exists.
    if "local" not in remotes and (any_file or os.path.exists(socket)):
        remotes["local"] = Remote(
            name="local", kind=flavour, address=f"unix://{socket}",
            source="built-in 'local' remote of the " + ("lxc" if flavour == "lxd" else "incus")
            + " CLI",
            addresses=(f"unix://{socket}",),
        )
    return remotes


def _extra_remote(spec: Mapping[str, Any], source: str, out: Discovery) -> Remote | None:
    name = str(spec.get("name") or "")
    kind = str(spec.get("kind") or spec.get("backend") or "lxd")
    address = str(spec.get("address") or "")
    if not name:
        out.problems.append(ConfigProblem(source, "a [[remote]] entry has no 'name'"))
        return None
    if kind == "libvirt":
        return _libvirt_remote(name, str(spec.get("uri") or address), source, out,
                               read_only=bool(spec.get("read_only", False)))
    if kind not in ("lxd", "incus"):
        out.problems.append(ConfigProblem(
            source, f"remote '{name}': unknown kind '{kind}' (use lxd, incus or libvirt)"))
        return None
    if not address:
        out.problems.append(ConfigProblem(source, f"remote '{name}' has no 'address'"))
        return None
    if address.startswith("/"):
        address = "unix://" + address
    if not (address.startswith("unix://") or address.startswith("https://")):
        out.problems.append(
            ConfigProblem(
                source, f"remote '{name}': address must be https://host:port or a socket path"
            )
        )
        return None
    def p(key: str) -> str | None:
        v = spec.get(key)
        return str(Path(str(v)).expanduser()) if v else None
    return Remote(
        name=name, kind=kind, address=address, project=str(spec.get("project") or "default"),
        client_cert=p("client_cert"), client_key=p("client_key"), server_cert=p("server_cert"),
        source=source, read_only=bool(spec.get("read_only", False)), addresses=(address,),
    )


# libvirt ---------------------------------------------------------------------------------

_REAL_SYSTEM_SOCKETS = ("/run/libvirt/virtqemud-sock", "/run/libvirt/libvirt-sock")
LIBVIRT_SYSTEM_SOCKETS = _REAL_SYSTEM_SOCKETS
"""Where a system libvirt (modular ``virtqemud`` or monolithic ``libvirtd``) listens. A
test that moves them elsewhere gets a remote naming the socket it found."""


def libvirt_system_socket(env: Mapping[str, str]) -> str | None:
    """The socket of this host's ``qemu:///system``, when one is there."""
    for path in LIBVIRT_SYSTEM_SOCKETS:
        if _is_socket(path):
            return path
    return None


def _is_socket(path: str) -> bool:
    import stat

    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _libvirt_remote(name: str, uri: str, source: str, out: Discovery, *,
                    read_only: bool = False) -> Remote | None:
    """A libvirt remote (``uri``: ``qemu:///system``, ``qemu+ssh://user@host/system``…);
    one the binding cannot serve here keeps the reason as its problem."""
    from urllib.parse import urlsplit

    scheme = urlsplit(uri).scheme
    if not uri or not scheme or "://" not in uri:
        out.problems.append(ConfigProblem(
            source, f"remote '{name}': a libvirt remote needs a uri such as "
                    "qemu:///system or qemu+ssh://user@host/system"))
        return None
    from .libvirt import unavailable_reason

    reason = unavailable_reason(load=False)
    return Remote(name=name, kind="libvirt", address=uri, source=source, read_only=read_only,
                  addresses=(uri,), problem=f"not connected: {reason}" if reason else None)


def libvirt_aliases(path: Path, out: Discovery) -> dict[str, str]:
    """``uri_aliases`` of a libvirt client config (``libvirt.conf``): name -> URI."""
    import re

    out.looked_in.append(str(path))
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as e:
        out.problems.append(ConfigProblem(str(path), f"cannot read it ({e.strerror or e})"))
        return {}
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    found = re.search(r"^\s*uri_aliases\s*=\s*\[(.*?)\]", text, re.S | re.M)
    aliases = {}
    for entry in re.findall(r'"([^"]*)"|\'([^\']*)\'', found.group(1)) if found else ():
        alias, sep, target = (entry[0] or entry[1]).partition("=")
        if sep and re.fullmatch(r"[A-Za-z0-9_.\-]+", alias) and "://" in target:
            aliases[alias] = target
        else:
            out.problems.append(ConfigProblem(
                str(path), f"uri_aliases entry {(entry[0] or entry[1])!r} is not NAME=URI"))
    return aliases


def libvirt_remotes(env: Mapping[str, str], out: Discovery, *,
                    uid: int | None = None) -> dict[str, Remote]:
    """This host's ``qemu:///system`` (when its socket is there), the user's
    ``qemu:///session`` (not root's), the ``uri_aliases`` of the user's ``libvirt.conf``
    and the connections virt-manager saved (``backends/libvirt/discovery.py``)."""
    from .libvirt import discovery

    uid = os.geteuid() if uid is None else uid
    found: dict[str, Remote] = {}
    socket = libvirt_system_socket(env)
    out.looked_in.extend(LIBVIRT_SYSTEM_SOCKETS)
    if socket:
        uri = ("qemu:///system" if socket in _REAL_SYSTEM_SOCKETS
               else f"qemu+unix:///system?socket={socket}")
        r = _libvirt_remote("libvirt", uri, f"socket {socket}", out)
        if r is not None:
            found[r.name] = r
    session = discovery.session_socket(env, uid)
    if session:
        r = _libvirt_remote("libvirt-session", discovery.session_uri(session, uid),
                            f"socket {session}", out)
        if r is not None:
            found[r.name] = r
    config = Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config") / "libvirt"
    conf = config / "libvirt.conf"
    for alias, uri in libvirt_aliases(conf, out).items():
        r = _libvirt_remote(alias, uri, str(conf), out)
        if r is not None:
            found[r.name] = r
    out.looked_in.append("gsettings " + " ".join(discovery.VIRT_MANAGER_KEY))
    for uri in discovery.virt_manager_uris(env):
        name = base = discovery.name_for(uri)
        if any(discovery.same_uri(uri, r.address) for r in found.values()) or (
                discovery.is_local(uri) and (name in found or uid == 0 and "session" in uri)):
            continue  # known already (this host's system or session connection)
        n = 1
        while name in found:
            n += 1
            name = f"{base}-{n}"
        r = _libvirt_remote(name, uri, "virt-manager (gsettings)", out)
        if r is not None:
            found[name] = r
    return found


def _own_files_checked(remote: Remote) -> Remote:
    """A remote corral added (``remotes.toml``): its client certificate, key and pinned
    server certificate are corral's own files, read by path when it connects. One that
    another user put there or can change makes the remote a problem, never connected."""
    for path, private in ((remote.client_key, True), (remote.client_cert, False),
                          (remote.server_cert, False)):
        problem = check_owned(path, private=private) if path else None
        if problem:
            return replace(remote, problem=f"not connected: {problem}")
    return remote


def discover(
    env: Mapping[str, str] | None = None,
    *,
    extra: Sequence[Mapping[str, Any]] = (),
    extra_source: str = "corral config",
    added: Sequence[Mapping[str, Any]] = (),
    added_source: str = "",
    read_only: Sequence[str] = (),
    hidden: Sequence[str] = (),
) -> Discovery:
    """Find every LXD/Incus remote the user configured.

    Args:
        env: environment to resolve paths with (defaults to ``os.environ``).
        extra: ``[[remotes]]`` entries from corral's own config; they win over CLI remotes
            of the same name.
        extra_source: the path of corral's config, for messages.
        added: remotes added in corral (``remotes.toml``, from ``added_source``); they win
            over CLI remotes and lose to ``extra``.
        read_only: names of remotes to mark read-only.
        hidden: names of remotes to leave out.

    Returns:
        The remotes (LXD first, then Incus, libvirt, then corral's own), image sources and
        problems.
    """
    env = os.environ if env is None else env
    out = Discovery()
    lxd = _flavour("lxd", env, out)
    incus = _flavour("incus", env, out)
    merged: dict[str, Remote] = dict(lxd)
    for name, r in incus.items():
        shown = name if name not in merged else f"incus-{name}"
        merged[shown] = replace(r, name=shown)
    for name, r in libvirt_remotes(env, out).items():
        shown = name if name not in merged else f"libvirt-{name}"
        merged[shown] = replace(r, name=shown)
    for spec, source in [*((s, added_source) for s in added),
                         *((s, extra_source) for s in extra)]:
        remote = _extra_remote(spec, source, out)
        if remote is not None:
            merged[remote.name] = _own_files_checked(remote) if source == added_source else remote
    for name in list(merged):
        if name in hidden:
            del merged[name]
        elif name in read_only:
            merged[name] = replace(merged[name], read_only=True)
    out.remotes = list(merged.values())
    return out


def remote_warnings(remote: Remote) -> list[str]:
    """What the user should know about how safely an HTTPS remote is reached (the remotes
    pane shows it): a remote without a pinned server certificate (any certificate a system
    CA issued for its address is accepted), and a client key other users can read."""
    if not remote.address.startswith("https://"):
        return []
    out = []
    if not remote.server_cert:
        out.append("not pinned: no server certificate is stored for it, so any certificate "
                   "a system CA issued for its address is trusted")
    if remote.client_key:
        try:
            mode = os.stat(remote.client_key).st_mode & 0o777
        except OSError:
            mode = 0
        if mode & 0o044:
            out.append(f"the client key {remote.client_key} is readable by other users "
                       f"(mode {mode:04o}): chmod 600 it")
    return out
