"""Sizes as users type them: ``512MiB``, ``2GiB``, ``1.5G``, ``10GB``, ``1024`` (bytes)."""

from __future__ import annotations

import re
from fractions import Fraction

_SIZE = re.compile(r"^\s*([0-9]{1,20}(?:\.[0-9]{1,12})?)\s*([kmgtpe]?)(i?)(b?)\s*$",
                   re.IGNORECASE | re.ASCII)
MAX_SIZE = 1 << 63
"""No size anywhere is this large (8 EiB); a larger one is a typing error."""
MAX_DIGITS = 15


def is_whole(text: str, max_digits: int = MAX_DIGITS) -> bool:
    """``text`` is a whole number in ASCII digits, not too long to be meant: ``"٣"`` and
    ``"³"`` are digits to :meth:`str.isdigit` but not here."""
    return text.isascii() and text.isdigit() and len(text) <= max_digits
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


def parse_size(text: str, *, default_unit: str = "") -> int:
    """Bytes in ``text``. ``KiB``/``MiB``/``GiB`` are binary, ``KB``/``MB``/``GB`` decimal,
    a bare ``K``/``M``/``G`` binary (as QEMU and LXD read them); a plain number is in
    ``default_unit`` (e.g. ``"MiB"``), else bytes.

    Raises:
        ValueError: not a size, in words fit for the UI.
    """
    m = _SIZE.match(text or "")
    if not m:
        raise ValueError(f"'{text}' is not a size (examples: 512MiB, 2GiB, 10GB)")
    number, prefix, binary, bytes_suffix = m.groups()
    if not prefix and not binary and not bytes_suffix and default_unit:
        return parse_size(number + default_unit)
    if binary and not prefix:
        raise ValueError(f"'{text}' is not a size (examples: 512MiB, 2GiB, 10GB)")
    base = 1000 if (prefix and bytes_suffix and not binary) else 1024
    value = Fraction(number) * base ** _POWER[prefix.lower()]  # exact, unlike a float
    if value.denominator != 1 and not prefix:
        raise ValueError(f"'{text}': a number of bytes must be whole")
    if value >= MAX_SIZE:
        raise ValueError(f"'{text}' is too large (at most 8EiB)")
    return int(value)


def format_size(value: int) -> str:
    """Bytes as the shortest exact binary size: ``536870912`` → ``512MiB``."""
    for unit, power in (("EiB", 6), ("PiB", 5), ("TiB", 4), ("GiB", 3), ("MiB", 2),
                        ("KiB", 1)):
        step = 1024 ** power
        if value and value % step == 0:
            return f"{value // step}{unit}"
    return f"{value}B"


def human_size(n: int, *, decimals: int = 1, sep: str = " ") -> str:
    """Bytes rounded for reading, not for settings: ``1536`` → ``1.5 KiB``, with
    ``decimals`` places from KiB on and ``sep`` between number and unit (the CLIs print
    ``25.08GiB``: ``decimals=2, sep=""``)."""
    names = ("B", "KiB", "MiB", "GiB", "TiB")
    size, i = float(n), 0
    while size >= 1024 and i < len(names) - 1:
        size /= 1024
        i += 1
    number = f"{size:.0f}" if i == 0 else f"{size:.{decimals}f}"
    return f"{number}{sep}{names[i]}"


def size_or_none(text: str | None) -> int | None:
    """Like :func:`parse_size` for values read back from a daemon or a config file, where
    anything that is not a size (``50%``, empty, malformed) means "no size": ``None``."""
    if not text:
        return None
    try:
        return parse_size(str(text))
    except ValueError:
        return None


LIBVIRT_UNITS = {"b": 1, "bytes": 1, "kb": 1000, "k": 1 << 10, "kib": 1 << 10,
                 "mb": 1000**2, "m": 1 << 20, "mib": 1 << 20, "gb": 1000**3, "g": 1 << 30,
                 "gib": 1 << 30, "tb": 1000**4, "t": 1 << 40, "tib": 1 << 40}
"""libvirt XML's ``unit`` attribute (``<memory unit='KiB'>``) -> bytes per unit: ``KB``
decimal, ``k``/``KiB`` binary, as libvirt's formatdomain reads them."""


def libvirt_bytes(amount: str, unit: str | None, default: str = "KiB") -> int | None:
    """Bytes of a libvirt XML size (its text and ``unit``), None when not understood."""
    factor = LIBVIRT_UNITS.get((unit or default).lower())
    amount = (amount or "").strip()
    if factor is None or not is_whole(amount):
        return None
    return int(amount) * factor
