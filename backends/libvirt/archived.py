"""What a libvirt domain archive (``export.py``) may hold, and how its domain XML is
checked before libvirt is given it. An archive is hostile input: it may come from anyone.

The archive (a tar, read only through the one archive reader, :mod:`backends.archive`):

- ``manifest.json``: ``{"format": "corral-libvirt-domain", "version": 1, "name": …,
  "disks": [{"target": "vda", "member": "disk-vda.qcow2", "format": "qcow2"}, …]}``;
- ``domain.xml``: the domain's saved (inactive) definition, as libvirt wrote it;
- ``disk-<target>.qcow2`` / ``disk-<target>.raw``: the disk files, byte for byte;
- ``snapshot-<NNN>.xml``: libvirt's metadata of each internal snapshot (its data is inside
  the qcow2 files), parents first; the manifest lists them and names the current one.
  Each snapshot's ``<domain>`` (and ``<inactiveDomain>``) is checked as the domain's XML
  is (:func:`checked_snapshot`): reverting to it defines that XML.

Nothing else: plain files at the top only, no links, no directories (:class:`DomainArchive`).

The domain XML (:func:`checked_domain`) is parsed by ``xml.etree`` (it fetches nothing)
after any ``<!DOCTYPE`` or ``<!ENTITY`` has refused it, then walked against allow-lists:
every element of the domain and of its devices must be one corral knows to touch nothing
on the host, else the archive is refused naming it (``<hostdev>``, ``<filesystem>``,
``<qemu:commandline>``, a disk or serial port on a host file, a host sound or input
device, …). What only names this host's own things is dropped instead, and said in the
docs: the emulator (libvirt picks this host's), the UUID, MAC addresses, the NVRAM file,
security labels, a NIC's host tap name, where a screen listens. Kernel, initrd, device
tree and firmware files are host paths: taken only when a domain already defined on that
daemon uses the same file (or, for firmware, from the usual firmware directories)."""

from __future__ import annotations

import json
import re
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ..archive import ArchiveRefused, Policy

FORMAT, VERSION = "corral-libvirt-domain", 1
MANIFEST, XML = "manifest.json", "domain.xml"
DISK_RE = re.compile(r"^disk-([a-z]{1,8}[0-9]{0,3}[a-z]{0,3})\.(qcow2|raw)$")
KEPT_LIMIT = 16 << 20
"""The manifest and XML files together (kept in memory; each also under the reader's own
limit)."""
SNAP_RE = re.compile(r"^snapshot-[0-9]{3}\.xml$")
TARGET_RE = re.compile(r"^[a-z]{1,8}[0-9]{0,3}[a-z]{0,3}$")
FIRMWARE_DIRS = ("/usr/share/OVMF/", "/usr/share/ovmf/", "/usr/share/qemu/",
                 "/usr/share/seabios/", "/usr/share/edk2/", "/usr/share/AAVMF/",
                 "/usr/share/qemu-efi-aarch64/")
"""Where a domain's firmware (``<loader>``) is taken from without a domain here using it."""

_TOP = {"name", "uuid", "genid", "title", "description", "metadata", "memory",
        "currentMemory", "maxMemory", "vcpu", "vcpus", "iothreads", "iothreadids",
        "cputune", "memtune", "memoryBacking", "numatune", "os", "features", "cpu", "clock",
        "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "devices",
        "resource", "seclabel", "keywrap", "sysinfo", "perf", "blkiotune"}
_DROPPED_TOP = {"uuid", "genid", "resource", "seclabel"}
_OS = {"type", "loader", "nvram", "kernel", "initrd", "dtb", "cmdline", "boot", "bootmenu",
       "smbios", "bios", "firmware"}
_HOST_FILES = ("loader", "kernel", "initrd", "dtb")
_DEVICES = {"emulator", "disk", "controller", "interface", "input", "graphics", "video",
            "serial", "parallel", "console", "channel", "sound", "audio", "watchdog",
            "memballoon", "rng", "panic", "hub", "redirdev", "vsock", "iommu", "tpm"}
_DISK_CHILDREN = {"driver", "source", "target", "address", "boot", "readonly", "shareable",
                  "serial", "wwn", "vendor", "product", "iotune", "alias", "geometry",
                  "blockio", "backingStore"}
_NIC_TYPES = {"network", "bridge", "direct", "user"}
_NIC_CHILDREN = {"mac", "source", "model", "target", "address", "alias", "boot", "rom",
                 "driver", "bandwidth", "vlan", "link", "mtu", "coalesce", "virtualport",
                 "filterref", "tune", "guest", "port", "acpi"}
_CHAR_TYPES = {"pty", "null", "vc", "spicevmc", "spiceport", "qemu-vdagent", "unix"}
_CHAR_CHILDREN = {"target", "address", "alias", "source"}
_INPUTS = {"mouse", "tablet", "keyboard"}
_SCREENS = {"vnc", "spice"}
_AUDIO = {"none", "spice"}
_RNG_FILES = {"/dev/random", "/dev/urandom"}


@dataclass(frozen=True)
class ArchivedDisk:
    target: str
    member: str
    format: str


class DomainArchive(Policy):
    """The :class:`~backends.archive.Policy` of a libvirt domain archive: exactly the
    manifest, the XML and the disk files, plain files at the top, nothing else."""

    where = "the import's private directory"

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        if name not in (MANIFEST, XML) and not DISK_RE.match(name) and \
                not SNAP_RE.match(name):
            return (f"it holds '{name}', which is not part of a libvirt domain archive "
                    f"({MANIFEST}, {XML}, disk-<target>.qcow2 or .raw, snapshot-<N>.xml)")
        if not member.isreg():
            return f"its member '{name}' is not a plain file (a link, directory or device)"
        return None

    def __init__(self) -> None:
        self.kept_bytes = 0

    def keep(self, name: str) -> bool:
        return name in (MANIFEST, XML) or bool(SNAP_RE.match(name))

    def kept(self, name: str, data: bytes) -> None:
        self.kept_bytes += len(data)
        if self.kept_bytes > KEPT_LIMIT:
            raise ArchiveRefused(f"its definitions (the XML, the snapshots) are implausibly "
                                 f"large together (over {KEPT_LIMIT >> 20} MiB at {name})")

    def finish(self, seen: dict[str, bytes]) -> None:
        for needed in (MANIFEST, XML):
            if needed not in seen:
                raise ArchiveRefused(f"it has no {needed}")


@dataclass
class Manifest:
    disks: list[ArchivedDisk]
    snapshots: list[str]
    """The snapshot members, parents first."""
    current: str
    """The current snapshot's member ("" for none)."""


def manifest_json(name: str, disks: list[ArchivedDisk], snapshots: list[str],
                  current: str) -> bytes:
    return json.dumps({"format": FORMAT, "version": VERSION, "name": name,
                       "disks": [{"target": d.target, "member": d.member, "format": d.format}
                                 for d in disks],
                       "snapshots": snapshots, "current": current}, indent=1).encode()


def read_manifest(data: bytes, members: set[str]) -> Manifest:
    """What a manifest names, checked against the files the archive held.

    Raises:
        ArchiveRefused: not corral's manifest, another version, or inconsistent."""
    try:
        found = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ArchiveRefused(f"its {MANIFEST} is not JSON") from None
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        raise ArchiveRefused(f"its {MANIFEST} is not that of a corral libvirt domain archive")
    if found.get("version") != VERSION:
        raise ArchiveRefused(f"it is version {found.get('version')!r} of corral's libvirt "
                             f"domain archive; this corral reads version {VERSION}")
    disks, listed = [], found.get("disks")
    if not isinstance(listed, list):
        raise ArchiveRefused(f"its {MANIFEST} lists no disks")
    for item in listed:
        if not isinstance(item, dict):
            raise ArchiveRefused(f"its {MANIFEST} has a damaged disk entry")
        target, member, fmt = (str(item.get(k, "")) for k in ("target", "member", "format"))
        match = DISK_RE.match(member)
        if not match or match.group(1) != target or match.group(2) != fmt:
            raise ArchiveRefused(f"its {MANIFEST} names a disk '{member}' for '{target}' "
                                 f"({fmt}), which is not how corral names them")
        disks.append(ArchivedDisk(target, member, fmt))
    named = {d.member for d in disks}
    held = {m for m in members if DISK_RE.match(m)}
    if len(named) != len(disks) or named != held:
        raise ArchiveRefused(f"its {MANIFEST} names the disks {', '.join(sorted(named)) or 'none'}"
                             f", the archive holds {', '.join(sorted(held)) or 'none'}")
    snaps, current = found.get("snapshots", []), found.get("current", "")
    held = {m for m in members if SNAP_RE.match(m)}
    if not isinstance(snaps, list) or not all(isinstance(m, str) for m in snaps) or \
            len(set(snaps)) != len(snaps) or set(snaps) != held or \
            not isinstance(current, str) or (current and current not in held):
        raise ArchiveRefused(f"its {MANIFEST} does not list the snapshots the archive holds "
                             f"({', '.join(sorted(held)) or 'none'})")
    return Manifest(disks, snaps, current)


class DomainRefused(ArchiveRefused):
    """A domain definition refused; ``problems`` lists what, in words."""

    def __init__(self, problems: list[str], text: str) -> None:
        super().__init__(text)
        self.problems = problems


@dataclass
class Checked:
    """A domain XML that passed: the tree (what only named the old host dropped), the
    disks it brings by target, and the host files it names (kernel, firmware, …)."""

    root: ET.Element
    disks: dict[str, ET.Element]
    host_files: dict[str, str]
    """``{path: role}``: to be accepted by the daemon's own domains (:func:`host_file_problems`)."""


def _tag(el: ET.Element) -> str:
    return el.tag if isinstance(el.tag, str) else "?"


def _foreign(el: ET.Element) -> bool:
    return _tag(el).startswith("{")


def _parsed(text: bytes, member: str) -> ET.Element:
    if b"<!DOCTYPE" in text or b"<!ENTITY" in text:
        raise ArchiveRefused(f"its {member} declares a document type or entities, which "
                             f"libvirt's XML never needs")
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        raise ArchiveRefused(f"its {member} is not well-formed XML ({e})") from None


def checked_domain(text: bytes | ET.Element, brought: set[str], *, member: str = XML,
                   every_disk: bool = True) -> Checked:
    """Parse and check an archive's domain XML (see the module docstring). ``brought``:
    the disk targets the archive holds files for (``every_disk``: each must be a disk of
    this XML; a snapshot's older XML may have had fewer).

    Raises:
        ArchiveRefused: every problem found, in words."""
    root = text if isinstance(text, ET.Element) else _parsed(text, member)
    if root.tag != "domain" or root.get("type") not in ("qemu", "kvm"):
        raise ArchiveRefused(f"its {member} is not a QEMU domain (<domain type='qemu'> or "
                             f"'kvm')")
    problems: list[str] = []
    host_files: dict[str, str] = {}
    for el in list(root):
        tag = _tag(el)
        if _foreign(el) or tag not in _TOP:
            problems.append(f"<{_shown_tag(el)}>" + (" (QEMU options passed straight to the "
                                                     "emulator)" if "qemu" in tag else ""))
        elif tag in _DROPPED_TOP:
            root.remove(el)
        elif tag == "sysinfo" and el.get("type", "smbios") != "smbios":
            problems.append(f"<sysinfo type='{el.get('type')}'> (host files given to the guest)")
        elif tag == "blkiotune" and el.find("device") is not None:
            problems.append("<blkiotune> naming host devices")
    for key in ("id",):
        root.attrib.pop(key, None)
    os_el = root.find("os")
    if os_el is not None:
        _check_os(os_el, problems, host_files)
    disks: dict[str, ET.Element] = {}
    devices = root.find("devices")
    if devices is not None:
        for dev in list(devices):
            tag = _tag(dev)
            if _foreign(dev) or tag not in _DEVICES:
                problems.append(f"<{_shown_tag(dev)}> (a device of the host, or unknown to "
                                f"corral)")
                continue
            if tag == "emulator":
                devices.remove(dev)  # this host's libvirt picks its own
                continue
            problem = _DEVICE_CHECKS.get(tag, _no_check)(dev, brought, disks)
            if problem:
                problems.append(problem)
    missing = sorted(brought - set(disks))
    if missing and every_disk:
        problems.append(f"disk files for {', '.join(missing)}, which its XML has no disk for")
    if problems:
        raise DomainRefused(problems, f"its {member} has what corral does not take from an archive, "
                             f"because it would reach this host's files, devices or "
                             f"programs: {'; '.join(problems[:8])}"
                             + (f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""))
    return Checked(root, disks, host_files)


@dataclass
class CheckedSnapshot:
    """A snapshot's XML that passed, and its domain definitions (checked as the domain's)."""

    member: str
    root: ET.Element
    domains: list[Checked]


_SNAPSHOT = {"name", "description", "state", "parent", "creationTime", "active", "memory",
             "disks", "domain", "inactiveDomain", "cookie"}


def checked_snapshot(text: bytes, member: str, brought: set[str]) -> CheckedSnapshot:
    """Parse and check one archived snapshot's XML: an internal snapshot (its memory and
    disks in the qcow2 files, no file of the host named), its domain definitions checked
    as :func:`checked_domain` does.

    Raises:
        ArchiveRefused: every problem found, in words."""
    root = _parsed(text, member)
    if root.tag != "domainsnapshot":
        raise ArchiveRefused(f"its {member} is not a libvirt snapshot")
    name = (root.findtext("name") or "").strip()
    problems = [] if name and "/" not in name else ["no usable name"]
    domains = []
    for el in list(root):
        tag = _tag(el)
        if _foreign(el) or tag not in _SNAPSHOT:
            problems.append(f"<{_shown_tag(el)}>")
        elif tag == "memory" and (el.get("snapshot", "no") not in ("no", "internal")
                                  or el.get("file")):
            problems.append("memory kept in a file of the host (an external snapshot)")
        elif tag == "disks" and any(d.get("snapshot", "no") not in ("no", "internal")
                                    or len(d) for d in el):
            problems.append("disks kept in files of the host (an external snapshot)")
        elif tag == "cookie" and any(_tag(c) not in ("cpu", "allowReboot") for c in el):
            problems.append("a <cookie> with more than the CPU model")
        elif tag in ("domain", "inactiveDomain"):
            el.tag = "domain"
            try:
                domains.append(checked_domain(el, brought, member=member, every_disk=False))
            except DomainRefused as e:
                problems += [f"in its saved definition, {p}" for p in e.problems]
            except ArchiveRefused as e:
                problems.append(str(e))
            el.tag = tag
    if problems:
        raise ArchiveRefused(f"its {member} has what corral does not take from an archive: "
                             f"{'; '.join(problems[:8])}")
    return CheckedSnapshot(member, root, domains)


def _shown_tag(el: ET.Element) -> str:
    tag = _tag(el)
    if tag.startswith("{"):
        uri, _, local = tag[1:].partition("}")
        return f"{'qemu:' if 'qemu' in uri else uri + ' '}{local}"
    return tag


def _check_os(os_el: ET.Element, problems: list[str], host_files: dict[str, str]) -> None:
    for el in list(os_el):
        tag = _tag(el)
        if _foreign(el) or tag not in _OS:
            problems.append(f"<os><{_shown_tag(el)}>" + (" (ACPI tables read from host files)"
                                                         if tag == "acpi" else ""))
        elif tag == "smbios" and el.get("mode") == "host":
            problems.append("<os><smbios mode='host'> (this host's hardware identity given "
                            "to the guest)")
        elif tag == "nvram":
            os_el.remove(el)  # libvirt makes a fresh one from the firmware's template
        elif tag in _HOST_FILES and (el.text or "").strip():
            path = (el.text or "").strip()
            if not path.startswith("/") or "/../" in path + "/" or "/./" in path + "/":
                problems.append(f"<{tag}> {path} (not a plain absolute path)")
            else:
                host_files[path] = tag


def host_file_problems(checked: Checked, used_here: set[str]) -> list[str]:
    """The host files (kernel, initrd, device tree, firmware) that neither a domain of
    the daemon already uses (``used_here``) nor, for firmware, a firmware directory
    holds."""
    out = []
    for path, role in sorted(checked.host_files.items()):
        if path in used_here:
            continue
        if role == "loader" and path.startswith(FIRMWARE_DIRS):
            continue
        out.append(f"<{role}> {path}")
    return out


def host_files_of(xml: str) -> set[str]:
    """The kernel, initrd, device tree and firmware files a defined domain uses."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return set()
    return {(el.text or "").strip() for tag in _HOST_FILES for el in root.iterfind(f"os/{tag}")
            if (el.text or "").strip()}


def _no_check(_dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    return None


def _disk(dev: ET.Element, brought: set[str], disks: dict[str, ET.Element]) -> str | None:
    target = dev.find("target")
    name = target.get("dev", "") if target is not None else ""
    device = dev.get("device", "disk")
    extra = sorted({_shown_tag(c) for c in dev if _foreign(c) or _tag(c) not in _DISK_CHILDREN})
    if extra:
        return f"<disk> {name} with <{'>, <'.join(extra)}> (host secrets or paths)"
    if device in ("cdrom", "floppy") and dev.find("source") is None:
        return None  # an empty drive
    if name not in brought or device != "disk" or not TARGET_RE.match(name):
        source = dev.find("source")
        where = next((v for k, v in (source.attrib.items() if source is not None else ())
                      if k in ("file", "dev", "dir", "volume", "name")), dev.get("type", "?"))
        return f"a {device} {name or '?'} on {where} (a host path, not a disk it brings)"
    if dev.get("type", "file") not in ("file", "block", "volume"):
        return f"a disk {name} of type '{dev.get('type')}'"
    if name in disks:
        return f"two disks for {name}"
    for drop in dev.findall("backingStore"):
        dev.remove(drop)
    disks[name] = dev
    return None


def _interface(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    kind = dev.get("type", "")
    extra = sorted({_shown_tag(c) for c in dev if _foreign(c) or _tag(c) not in _NIC_CHILDREN})
    if kind not in _NIC_TYPES or extra:
        return (f"<interface type='{kind}'>" + (f" with <{'>, <'.join(extra)}>" if extra else "")
                + " (host devices, sockets or scripts)")
    for child in dev.findall("mac") + dev.findall("target"):
        dev.remove(child)  # new MACs; this host names its own tap devices
    return None


def _chardev(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    kind, tag = dev.get("type", "pty"), _tag(dev)
    extra = sorted({_shown_tag(c) for c in dev if _foreign(c) or _tag(c) not in _CHAR_CHILDREN})
    source = dev.find("source")
    if kind not in _CHAR_TYPES or extra:
        return f"a <{tag} type='{kind}'>" + (f" with <{'>, <'.join(extra)}>" if extra else "") \
            + " (a host file, device, program or network port)"
    if source is not None:
        if kind == "unix" and not source.get("path") and set(source.attrib) <= {"mode"}:
            return None
        if kind == "pty":
            dev.remove(source)  # a pty path is the old host's, made anew at each start
            return None
        return f"a <{tag} type='{kind}'> on {source.get('path') or 'a host path'}"
    return None


def _graphics(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    kind = dev.get("type", "")
    if kind not in _SCREENS:
        return f"<graphics type='{kind}'> (drawn on this host)"
    for key in list(dev.attrib):
        if key not in ("type", "keymap"):
            del dev.attrib[key]
    for child in list(dev):
        dev.remove(child)  # where it listened, GL render nodes: this host's defaults
    dev.set("autoport", "yes")
    return None


def _input(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    kind = dev.get("type", "")
    if kind not in _INPUTS or dev.find("source") is not None:
        return f"<input type='{kind}'> (a host input device)"
    return None


def _typed(allowed: set[str], what: str):
    def check(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
        kind = dev.get("type", "")
        if kind not in allowed or any(_tag(c) in ("source", "backend") for c in dev):
            return f"<{_tag(dev)} type='{kind}'> ({what})"
        return None
    return check


def _rng(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    backend = dev.find("backend")
    if backend is None:
        return "an <rng> without its backend"
    model = backend.get("model", "")
    if model == "builtin" or (model == "random" and (backend.text or "").strip() in _RNG_FILES):
        return None
    return f"an <rng> on {model} {(backend.text or '').strip()} (a host device or socket)"


def _tpm(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    backend = dev.find("backend")
    if backend is not None and backend.get("type") == "emulator" and \
            backend.find("encryption") is None:  # (an encryption names a host secret)
        return None
    return "a <tpm> that is not an emulated one (the host's TPM or a socket)"


def _sound(dev: ET.Element, _brought: set[str], _disks: dict) -> str | None:
    return None if all(_tag(c) in ("codec", "address", "alias", "audio") for c in dev) \
        else "<sound> with host settings"


_DEVICE_CHECKS = {
    "disk": _disk, "interface": _interface, "serial": _chardev, "parallel": _chardev,
    "console": _chardev, "channel": _chardev, "graphics": _graphics, "input": _input,
    "audio": _typed(_AUDIO, "host sound"), "redirdev": _typed({"spicevmc"}, "a host socket"),
    "rng": _rng, "tpm": _tpm, "sound": _sound,
}
