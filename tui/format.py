"""Pure display formatting. The only module that imports ``humanize``."""

from __future__ import annotations

from datetime import datetime, timezone

import humanize
from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.markup import escape

from backends.models import InstanceState, InstanceType
from backends.units import is_whole


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | None) -> str:
    """Bytes in at most three significant digits: ``512B``, ``420KiB``, ``23.4MiB``,
    ``1.25GiB`` (narrow columns, and figures that do not flicker in the last digit)."""
    if n is None:
        return ""
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)}B"
    if value >= 100:
        return f"{value:.0f}{_UNITS[unit]}"
    if value >= 10:
        return f"{value:.1f}{_UNITS[unit]}"
    return f"{value:.2f}{_UNITS[unit]}"


def memory(state: InstanceState | None, limit: int | None) -> str:
    if state is None:
        return ""
    lim = limit
    used = size(state.memory_usage)
    if state.memory_is_allocation:
        return f"{used} given"  # the guest reports no use: the allocation, said so
    return f"{used}/{size(lim)}" if lim else used


def cpu(state: InstanceState | None) -> str:
    if state is None or state.cpu_percent is None:
        return ""
    return f"{state.cpu_percent:.1f}%"


def disk(state: InstanceState | None) -> str:
    if state is None or not state.disk_usage:
        return ""
    return size(state.disk_usage)


def itype(t: InstanceType) -> str:
    return "VM" if t is InstanceType.VM else "CT"


def ago(when: datetime | None) -> str:
    if when is None:
        return ""
    if when.tzinfo is None:  # LXC and qemu-img give local times without a zone
        when = when.astimezone()
    return humanize.naturaltime(datetime.now(timezone.utc) - when)


_DURATION_UNITS = {"M": 60, "H": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400,
                   "y": 365 * 86400}


def parse_duration(text: str) -> float:
    """LXD's expiry syntax (``2d``, ``1w 3d``, ``12H``, ``30M``: M minutes, H hours, d days,
    w weeks, m months, y years) → seconds.

    Raises:
        ValueError: in words.
    """
    total = 0.0
    parts = text.split()
    if not parts:
        raise ValueError("An expiry is needed (e.g. 2d, 1w, 12H).")
    for part in parts:
        number, unit = part[:-1], part[-1:]
        if unit not in _DURATION_UNITS or not is_whole(number):
            raise ValueError(f"'{part}' is not a duration: use a number and one of M (minutes), "
                             f"H (hours), d, w, m (months), y — e.g. 2d or 1w 3d.")
        total += int(number) * _DURATION_UNITS[unit]
    return total


def _control_table(keep_lines: bool) -> dict[int, str]:
    table = {c: chr(0x2400 + c) for c in range(32)}  # C0 as control pictures: ␛ ␇ …
    table[0x7F] = "\u2421"  # ␡
    table.update({c: "\ufffd" for c in range(0x80, 0xA0)})  # C1 (8-bit CSI, OSC …)
    # bidi overrides and isolates would reorder what follows them on the line; the line
    # and paragraph separators break it
    table.update({c: "\ufffd" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                         0x2028, 0x2029)})
    # lone surrogates (a file name that is not UTF-8, decoded with surrogateescape) cannot
    # be written to the terminal at all
    table.update({c: "\ufffd" for c in range(0xD800, 0xE000)})
    if keep_lines:
        del table[ord("\n")], table[ord("\t")]
    return table


_CONTROLS = _control_table(keep_lines=False)
_CONTROLS_LINES = _control_table(keep_lines=True)


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` from a daemon, guest, file system or user with every control character made
    visible (one character for one, so styles over it stay in place): an escape sequence in
    a file name or an instance's description must not reach the terminal. C0 controls
    become their control pictures (ESC shows as ``␛``, BEL as ``␇``), DEL ``␡``, C1 code
    points, bidi overrides and lone surrogates ``�``. ``lines`` keeps newlines and tabs."""
    return text.translate(_CONTROLS_LINES if lines else _CONTROLS)


# The text gate: the one way text from outside becomes something on the screen ------------


def external(text: object, style: str | Style = "", *, lines: bool = False,
             **options) -> Text:
    """Text from outside — a daemon, a guest, a file system, a user — as a rich ``Text``
    for a widget: never read as markup, every control character made visible
    (:func:`printable`). ``options`` are ``Text``'s (``justify``, ``no_wrap``,
    ``overflow``…). Widgets build what they show from outside through this (or
    :func:`external_text` for a ``Text`` they assembled, :func:`gate` for anything):
    ``tests/unit/test_text_gate.py`` finds the ones that do not."""
    return Text(printable(str(text), lines=lines), style=style, **options)


def external_text(text: Text) -> Text:
    """:func:`printable` over a rich ``Text`` that was assembled from outside pieces
    (newlines and tabs kept), its spans unchanged. Changes ``text`` in place and returns
    it."""
    plain = text.plain
    safe = printable(plain, lines=True)
    if safe != plain:
        text.plain = safe
    return text


printable_text = external_text


def external_content(content: Content) -> Content:
    """:func:`printable` over a Textual ``Content`` (its spans kept: one character for
    one)."""
    safe = printable(content.plain, lines=True)
    if safe == content.plain:
        return content
    return Content(safe, list(content.spans))


def gate(content):
    """Whatever is about to be shown, made safe: a ``str`` becomes plain ``Text``
    (:func:`external`), a ``Text`` or ``Content`` has its control characters made
    visible; anything else (a rich ``Table`` of gated cells, a widget's own renderable)
    is passed on. ``tui/widgets/plain.py``'s widgets put every update through this."""
    if isinstance(content, str):
        return external(content, lines=True)
    if isinstance(content, Text):
        return external_text(content)
    if isinstance(content, Content):
        return external_content(content)
    return content


def markup_safe(text: object) -> str:
    """Outside text for a place that reads Textual markup (a screen's ``title``, a
    ``Binding`` description): made printable and its markup escaped."""
    return escape(printable(str(text)))
