"""XML from outside (OVF descriptors, ``.vbox`` files, libvirt domain XML), parsed with
the standard library and no more trust than it deserves: a document with a DOCTYPE or an
entity declaration is refused before ElementTree sees it (no entity expansion, no
external entities, no "billion laughs"), and so is one larger than :data:`LIMIT`.

Helpers read elements and attributes by their local names: exporters write the same
element under different namespace prefixes (``ovf:href``, ``href``), and corral only
needs what the element is."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Iterator
from xml.parsers import expat

LIMIT = 4 << 20
"""The largest descriptor corral reads (real ones are a few tens of KiB)."""


class XMLRefused(Exception):
    """The document is refused; the message says why, as a clause."""


def _refuse(what: str):  # an expat handler
    def handler(*_args: object) -> None:
        raise XMLRefused(f"it holds {what}, which corral does not read (an XML file "
                         f"from outside may not declare entities)")
    return handler


def parse(data: bytes) -> ET.Element:
    """The root element of ``data``.

    Raises:
        XMLRefused: too large, a DOCTYPE or entity declaration, or not well-formed XML.
    """
    if len(data) > LIMIT:
        raise XMLRefused(f"it is {len(data)} bytes long, more than the {LIMIT} bytes a "
                         f"descriptor may have")
    scan = expat.ParserCreate()
    scan.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    scan.StartDoctypeDeclHandler = _refuse("a DOCTYPE declaration")
    scan.EntityDeclHandler = _refuse("an entity declaration")
    scan.UnparsedEntityDeclHandler = _refuse("an entity declaration")
    scan.ExternalEntityRefHandler = _refuse("a reference to an external entity")
    try:
        scan.Parse(data, True)
    except expat.ExpatError as e:
        raise XMLRefused(f"it is not well-formed XML ({e})") from None
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        raise XMLRefused(f"it is not well-formed XML ({e})") from None


def local(name: str) -> str:
    """``name`` without its ``{namespace}``."""
    return name.rsplit("}", 1)[-1]


def kids(el: ET.Element | None, name: str) -> list[ET.Element]:
    """The children of ``el`` with the local name ``name``."""
    return [c for c in el if local(c.tag) == name] if el is not None else []


def kid(el: ET.Element | None, name: str) -> ET.Element | None:
    found = kids(el, name)
    return found[0] if found else None


def walk(el: ET.Element | None, name: str) -> Iterator[ET.Element]:
    """Every element below ``el`` (itself included) with the local name ``name``."""
    if el is None:
        return
    for c in el.iter():
        if local(c.tag) == name:
            yield c


def attr(el: ET.Element | None, name: str, default: str = "") -> str:
    """The attribute of ``el`` with the local name ``name`` (any namespace)."""
    if el is None:
        return default
    for key, value in el.attrib.items():
        if local(key) == name:
            return value
    return default


def text(el: ET.Element | None, name: str = "", default: str = "") -> str:
    """The stripped text of ``el`` (or of its child ``name``)."""
    if name:
        el = kid(el, name)
    if el is None or el.text is None:
        return default
    return el.text.strip()
