"""The one gate every disk image corral is given goes through (a VM created from an
image, a disk in an imported archive; a later OVA/VirtualBox import too).

An image passes as a :class:`GatedImage` only when it is one self-contained file of a
format QEMU opens here (raw or qcow2; vmdk, vdi, vhdx and vhd are accepted to be
converted into a fresh qcow2 by corral). Anything that makes QEMU open *other* files is
named before any tool opens them:

1. corral reads the image's header itself (:mod:`.image_headers`): its format (never left
   to QEMU's probing, which a guest can fool by writing a qcow2 header into a raw disk),
   a qcow2 backing file or external data file, a VMDK parent, a VMDK descriptor's extents.
2. Names QEMU would read as ``json:`` options or protocols (``nbd:``, ``http:`` …),
   devices, pipes, missing files, VMDK descriptors (whose data are other files by
   definition) and encrypted images are refused in words. Backing and data files that
   are plain files are :class:`Reference` s: the image is refused with
   :class:`NeedsConfirmation` naming each of them, unless the caller confirms exactly
   those (or confirms any).
3. Only then ``qemu-img info --backing-chain --output=json -f <format>`` opens it; every
   file it reports (layers, children, extents) must be the image or a named reference,
   in the formats corral expected, and every node below them a plain file.

The image, and every file it references, is opened once (a regular file, reached without
opening any device) and read through that descriptor by every tool afterwards
(``/dev/fd/N``; a chain as a ``json:`` description over the descriptors, every layer's
format, backing and data file given: :func:`pinned`), so a path swapped after the check
changes nothing. One that others may
rewrite in place is first copied privately (:func:`settled`). Every later use gives the
format explicitly (``-f``/``-F``/``format=``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import stat
from typing import Callable, Collection

from ..errors import InvalidInput, NeedsConfirmation, OperationFailed
from .host_paths import NotRegular, open_regular, writable_by_others
from .image_headers import CONVERTED, USABLE, Header, read_header
from .images import convert, qemu_img

MAX_CHAIN = 16


@dataclasses.dataclass(frozen=True)
class Reference:
    """Another file an image makes QEMU read."""

    kind: str
    """``backing file`` or ``external data file``."""
    path: str
    """Absolute, as QEMU opens it (relative names are taken from the naming image's
    directory)."""
    of: str
    """The image (or layer) that names it."""
    format: str = ""
    """The format the layer is read as (a data file: ``raw``)."""
    fd: int = dataclasses.field(default=-1, compare=False, repr=False)
    """The file, open since corral read its header (closed with its :class:`GatedImage`):
    tools read it through this descriptor, never by its name again."""

    def words(self) -> str:
        return f"the {self.kind} {self.path}"


@dataclasses.dataclass
class GatedImage:
    """An image that passed the gate."""

    path: str
    """Absolute path of the image."""
    format: str
    """Its format, given explicitly to every later tool."""
    virtual_size: int
    references: tuple[Reference, ...] = ()
    """Other files it makes QEMU read (empty: self-contained). Non-empty only when the
    caller confirmed them."""
    fd: int = -1
    """The image, open (closed by :meth:`close` or leaving a ``with`` block)."""

    @property
    def source(self) -> str:
        """What tools are to open: the checked descriptor (``/dev/fd/N``); for an image
        with references, a ``json:`` description of the whole chain over the checked
        descriptors, each layer's format, backing and data file given (:func:`pinned`),
        so no file is found by its name again, nor a format probed."""
        if self.fd < 0:
            return self.path
        return f"/dev/fd/{self.fd}" if self.self_contained else pinned(self)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self.fd, *(r.fd for r in self.references)) if fd >= 0)

    def close(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.fd = -1
        self.references = tuple(dataclasses.replace(r, fd=-1) for r in self.references)

    def __enter__(self) -> GatedImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def needs_conversion(self) -> bool:
        """Not raw or qcow2: converted into a fresh qcow2 before use."""
        return self.format not in USABLE

    @property
    def self_contained(self) -> bool:
        return not self.references


_BACKED = ("qcow2", "vmdk")  # formats whose layer may have a backing file


def pinned(image: GatedImage) -> str:
    """The ``json:`` filename of ``image``'s chain over its checked descriptors: every
    layer's driver, its file, its data file and its backing (none below the last layer)
    given by corral, so QEMU reads exactly the files corral checked, in the formats it
    read them as, even if a name, or a header naming files, changed since."""
    layers = [(image.path, image.format, image.fd),
              *((r.path, r.format, r.fd) for r in image.references
                if r.kind == "backing file")]
    data = {r.of: r.fd for r in image.references if r.kind == "external data file"}
    node: dict | None = None
    for path, fmt, fd in reversed(layers):
        layer: dict = {"driver": fmt, "file": {"driver": "file", "filename": f"/dev/fd/{fd}"}}
        if fmt in _BACKED:
            layer["backing"] = node
        if path in data:
            layer["data-file"] = {"driver": "file", "filename": f"/dev/fd/{data[path]}"}
        node = layer
    return "json:" + json.dumps(node)


def _close_refs(refs: Collection[Reference]) -> None:
    for r in refs:
        if r.fd >= 0:
            os.close(r.fd)


def has_protocol(name: str) -> bool:
    """QEMU reads ``name`` as a protocol or ``json:`` options, not a file (a ``:``
    before any ``/``, as QEMU's own test)."""
    head = name.split("/", 1)[0]
    return ":" in head or name.startswith("json:")


def confirmation_text(path: str, fmt: str, refs: Collection[Reference]) -> str:
    """The question :class:`NeedsConfirmation` asks: exactly what the image references."""
    named = "; ".join(r.words() + (f" (named by {r.of})" if r.of != path else "")
                      for r in refs)
    return (f"The image {path} is a {fmt} file that refers to other files: {named}. "
            f"QEMU would read those files too, with this user's rights: their contents "
            f"would end up in the VM's disk, readable by the guest. The VM gets a "
            f"flattened copy. Agree only if you made this image and know those files. "
            f"(If it is really a raw disk, and a guest wrote that header into it, give "
            f"the format raw instead.)")


def _refuse(path: str, why: str) -> InvalidInput:
    return InvalidInput(f"The image {path} was refused: {why}.")


def _reference(path: str, of: str, kind: str, name: str) -> Reference:
    """Check a name an image holds (a protocol, a device, a missing file are refused)."""
    who = "it" if of == path else f"its backing file {of}"
    if has_protocol(name):
        raise _refuse(path, f"{who} names its {kind} as {name!r}, which QEMU would read as "
                            f"a protocol or json: options (a network or device access), not "
                            f"a file")
    full = os.path.normpath(os.path.join(os.path.dirname(of), name))
    try:
        st = os.stat(full)
    except OSError as e:
        raise _refuse(path, f"{who} names the {kind} {full}, which cannot be used "
                            f"({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        what = ("a device" if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)
                else "not a regular file")
        raise _refuse(path, f"{who} names the {kind} {full}, which is {what}")
    try:
        fd = open_regular(full)  # the file checked is the file every tool reads
    except NotRegular:
        raise _refuse(path, f"{who} names the {kind} {full}, which is not a regular "
                            f"file") from None
    except OSError as e:
        raise _refuse(path, f"{who} names the {kind} {full}, which cannot be used "
                            f"({e.strerror})") from None
    return Reference(kind, full, of, fd=fd)


def _header(path: str, of_label: str, fmt: str | None, fd: int | None) -> Header:
    try:
        return read_header(of_label, fmt, fd)
    except OSError as e:
        raise _refuse(path, f"{of_label} cannot be read ({e.strerror})") from None


def _walk(path: str, fmt: str | None, fd: int) -> tuple[str, list[Reference]]:
    """The image's format and everything it references, from corral's own reading of the
    headers (no tool has opened anything yet). Blocking: run in a thread."""
    refs: list[Reference] = []
    try:
        return _chain(path, fmt, fd, refs)
    except BaseException:
        _close_refs(refs)
        raise


def _chain(path: str, fmt: str | None, fd: int, refs: list[Reference]
           ) -> tuple[str, list[Reference]]:
    layer, layer_fmt, top_fmt = path, fmt, ""
    for _depth in range(MAX_CHAIN):
        header = _header(path, layer, layer_fmt, fd if layer == path else refs[-1].fd)
        if header.problem:
            raise _refuse(path, header.problem if layer == path else
                          f"its backing file {layer} {header.problem}")
        top_fmt = top_fmt or header.format
        if layer != path:
            refs[-1] = dataclasses.replace(refs[-1], format=header.format)
        if header.data_file is not None:
            refs.append(dataclasses.replace(
                _reference(path, layer, "external data file", header.data_file),
                format="raw"))
        if header.backing is None:
            return top_fmt, refs
        ref = _reference(path, layer, "backing file", header.backing)
        refs.append(ref)
        if ref.path in (path, *(r.path for r in refs[:-1])):
            raise _refuse(path, f"its chain of backing files loops at {ref.path}")
        layer, layer_fmt = ref.path, header.backing_format
    raise _refuse(path, f"it has more than {MAX_CHAIN} backing files")


def _filenames(node: object, out: set[str], nodes: set[str]) -> None:
    """Every ``filename``, ``full-backing-filename`` and ``data-file`` in qemu-img's JSON
    (into ``out``), and the driver of every child node (into ``nodes``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("filename", "full-backing-filename", "data-file") \
                    and isinstance(value, str):
                out.add(value)
            elif key == "children" and isinstance(value, list):
                for child in value:
                    info = child.get("info") if isinstance(child, dict) else None
                    if isinstance(info, dict):
                        nodes.add(str(info.get("format")))
                    _filenames(info, out, nodes)
            else:
                _filenames(value, out, nodes)
    elif isinstance(node, list):
        for item in node:
            _filenames(item, out, nodes)


async def _qemu_img_check(path: str, fmt: str, refs: list[Reference], fd: int) -> int:
    """qemu-img's own view must match corral's: the image's virtual size."""
    source = f"/dev/fd/{fd}" if not refs else path
    try:
        out = await qemu_img("info", "--backing-chain", "--output=json", "-f", fmt, source,
                             pass_fds=(fd,))
        chain = json.loads(out)
    except OperationFailed as e:
        raise InvalidInput(f"{path} is not a {fmt} image QEMU can read: {e.message}") from e
    except ValueError as e:
        raise InvalidInput(f"{path}: qemu-img's answer was not understood ({e}).") from e
    if not isinstance(chain, list) or not chain or not isinstance(chain[0], dict):
        raise InvalidInput(f"{path}: qemu-img's answer was not understood.")
    layers = [path, *(r.path for r in refs if r.kind == "backing file")]
    formats = [fmt, *(r.format for r in refs if r.kind == "backing file")]
    seen = [(path if layer.get("filename") == source else str(layer.get("filename")),
             layer.get("format")) for layer in chain if isinstance(layer, dict)]
    allowed = {os.path.realpath(p) for p in (path, *(r.path for r in refs))}
    names: set[str] = set()
    nodes: set[str] = set()
    _filenames(chain, names, nodes)
    for name in names - {source}:
        places = {os.path.realpath(os.path.join(os.path.dirname(p), name)) for p in layers}
        if has_protocol(name) or not places & allowed:
            raise _refuse(path, f"qemu-img found it refers to {name!r}, which corral did "
                                f"not find in its header (it may have changed meanwhile)")
    odd = nodes - {"file", *formats}
    if odd:
        raise _refuse(path, f"qemu-img reads part of it through {', '.join(sorted(odd))}, "
                            f"not as plain files")
    if [os.path.realpath(f) for f, _ in seen] != [os.path.realpath(p) for p in layers] \
            or [f for _, f in seen] != formats:
        raise _refuse(path, "qemu-img reads its chain of files differently from corral "
                            "(it may have changed meanwhile)")
    return int(chain[0].get("virtual-size") or 0)


async def inspect_image(path: str, *, fmt: str | None = None,
                        confirmed: bool | Collection[str] = False) -> GatedImage:
    """Pass ``path`` through the gate (see the module). ``fmt``: the format, when known
    (the user said so, or corral made the file); otherwise corral reads it from the
    header, never QEMU. ``confirmed``: the user agreed to the references — ``True`` for
    any, or the exact collection of reference paths they were shown (a differing set is
    asked again).

    Raises:
        InvalidInput: refused, in words (not an image, a protocol or ``json:`` name, a
            device, a VMDK descriptor, an unknown or encrypted format, …).
        NeedsConfirmation: it references other files (``option="allow_backing"``); the
            message names each.
    """
    path = os.path.abspath(os.path.expanduser(path))  # never a protocol name for QEMU
    if fmt is not None and fmt not in USABLE + CONVERTED:
        raise InvalidInput(f"Unknown image format {fmt!r}: corral takes "
                           f"{', '.join(USABLE + CONVERTED)}.")
    try:
        fd = await asyncio.to_thread(open_regular, path)
    except NotRegular:
        raise _refuse(path, "it is not a regular file (a device, pipe or directory)") from None
    except OSError as e:
        raise InvalidInput(f"The image {path} cannot be used ({e.strerror}).") from None
    refs: list[Reference] = []
    try:
        found, refs = await asyncio.to_thread(_walk, path, fmt, fd)
        if refs:
            shown = {r.path for r in refs}
            if confirmed is not True and (not confirmed or set(confirmed) != shown):
                raise NeedsConfirmation(confirmation_text(path, found, refs),
                                        option="allow_backing")
        size = await _qemu_img_check(path, found, refs, fd)
    except BaseException:
        os.close(fd)
        _close_refs(refs)
        raise
    return GatedImage(path, found, size, tuple(refs), fd)


def _sparse_copy(fd: int, target: str) -> None:
    """Copy the file open on ``fd`` to the new private file ``target``, holes kept."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        offset, chunk = 0, 1 << 20
        while data := os.pread(fd, chunk, offset):
            if data.count(0) != len(data):
                os.pwrite(out, data, offset)
            offset += len(data)
        os.ftruncate(out, offset)
    finally:
        os.close(out)


def _refuse_loose_chain(image: GatedImage) -> None:
    """A chain is read through its descriptors with every layer's backing pinned, but a
    layer's header could still be rewritten in place to name an external data file,
    which QEMU would open by its name: a layer other users may write (other than raw
    bytes) is refused."""
    layers = [(image.path, image.format, image.fd),
              *((r.path, r.format, r.fd) for r in image.references if r.kind == "backing file")]
    loose = [path for path, fmt, fd in layers
             if fmt != "raw" and fd >= 0 and writable_by_others(os.fstat(fd))]
    if loose:
        raise InvalidInput(f"The image {image.path} refers to other files, and "
                           f"{', '.join(loose)} may be rewritten by other users while corral "
                           f"reads it (its header could name yet other files). Copy the "
                           f"files to a directory only you can change first.")


async def settled(image: GatedImage, scratch: str) -> GatedImage:
    """``image``, safe to read again: itself when nobody but root and this user can
    rewrite its bytes (or it is raw, whose bytes name no file), else a private copy at
    ``scratch`` (made from the checked descriptor, then gated again) — someone who may
    write the file could otherwise add a backing file between the check and the use.
    An image with references is read where it is (through its descriptors), and refused
    when a layer other than raw bytes may be written by others
    (:func:`_refuse_loose_chain`)."""
    if image.references:
        _refuse_loose_chain(image)
        return image
    if image.format == "raw" or not writable_by_others(os.fstat(image.fd)):
        return image
    try:
        await asyncio.to_thread(_sparse_copy, image.fd, scratch)
        try:
            return await inspect_image(scratch, fmt=image.format)
        except InvalidInput as e:  # NeedsConfirmation too: what was agreed has changed
            raise InvalidInput(f"The image {image.path} changed while corral read it (other "
                               f"users may write it), and is refused: "
                               f"{e.message.replace(scratch, 'its copy')}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


async def copy_to_qcow2(image: GatedImage, target: str,
                        say: Callable[[str], None] | None = None) -> None:
    """A fresh, self-contained qcow2 at ``target`` holding ``image`` (its references
    flattened in), the source format given explicitly, read through the checked
    descriptor when self-contained."""
    await convert(image.source, target, f"converting {image.format} image",
                  say or (lambda _text: None), src_format=image.format,
                  pass_fds=image.pass_fds)
