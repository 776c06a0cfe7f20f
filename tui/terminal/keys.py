"""Textual key events -> the bytes an xterm sends.

Textual names keys like ``ctrl+a``, ``shift+up``, ``ctrl+right_square_bracket``, ``f5``,
``alt+x``; :func:`key_to_bytes` turns a name (plus the event's character) into what a guest
expects on its tty. No Textual import: the widget passes ``event.key`` and ``event.character``.
"""

from __future__ import annotations

__all__ = ["SPECIAL_KEYS", "key_to_bytes", "special_key_bytes"]

ESC = "\x1b"
CSI = "\x1b["
SS3 = "\x1bO"

# Keys whose sequence takes an xterm modifier parameter: name -> (normal, application, final).
# Cursor keys and home/end: "CSI A" (or "SS3 A" in application mode), modified "CSI 1;m A".
_CURSOR = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
# Editing keys: "CSI n ~", modified "CSI n;m ~".
_TILDE = {"insert": 2, "delete": 3, "pageup": 5, "pagedown": 6,
          "f5": 15, "f6": 17, "f7": 18, "f8": 19, "f9": 20, "f10": 21, "f11": 23, "f12": 24}
# F1-F4: "SS3 P", modified "CSI 1;m P".
_SS3_F = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S"}

_PLAIN = {
    "enter": "\r",
    "return": "\r",
    "tab": "\t",
    "shift+tab": CSI + "Z",
    "backspace": "\x7f",
    "ctrl+h": "\x08",
    "escape": ESC,
    "ctrl+@": "\x00",
    "ctrl+space": "\x00",
    "ctrl-at": "\x00",
    "ctrl+2": "\x00",
    "ctrl+left_square_bracket": ESC,
    "ctrl+backslash": "\x1c",
    "ctrl+right_square_bracket": "\x1d",
    "ctrl+circumflex_accent": "\x1e",
    "ctrl+6": "\x1e",
    "ctrl+underscore": "\x1f",
    "ctrl+minus": "\x1f",
    "ctrl+question_mark": "\x7f",
    "space": " ",
}

_MODIFIER_BITS = {"shift": 1, "alt": 2, "ctrl": 4, "meta": 8}


def _split(key: str) -> tuple[set[str], str]:
    parts = key.split("+")
    mods: set[str] = set()
    while len(parts) > 1 and parts[0] in _MODIFIER_BITS:
        mods.add(parts.pop(0))
    return mods, "+".join(parts)


def key_to_bytes(key: str, character: str | None = None, *, app_cursor: bool = False
                 ) -> bytes | None:
    """The bytes for a key, or None when the key has no terminal encoding.

    Args:
        key: Textual's key name (``events.Key.key``).
        character: the character the key produced (``events.Key.character``), if any.
        app_cursor: the guest enabled application cursor keys (DECCKM).
    """
    text = _key_text(key, character, app_cursor)
    return None if text is None else text.encode("utf-8", "surrogateescape")


def _key_text(key: str, character: str | None, app_cursor: bool) -> str | None:
    if key in _PLAIN:
        return _PLAIN[key]
    mods, base = _split(key)
    if base in _CURSOR or base in _TILDE or base in _SS3_F:
        param = 1 + sum(_MODIFIER_BITS[m] for m in mods)
        if base in _CURSOR:
            final = _CURSOR[base]
            if param == 1:
                return (SS3 if app_cursor else CSI) + final
            return f"{CSI}1;{param}{final}"
        if base in _TILDE:
            n = _TILDE[base]
            return f"{CSI}{n}~" if param == 1 else f"{CSI}{n};{param}~"
        final = _SS3_F[base]
        return SS3 + final if param == 1 else f"{CSI}1;{param}{final}"
    if "alt" in mods or "meta" in mods:
        rest = "+".join(sorted(mods - {"alt", "meta"}, key=list(_MODIFIER_BITS).index) + [base])
        inner: str | None
        if rest == base and len(base) == 1:
            inner = base.upper() if "shift" in mods else base
        elif character and len(character) == 1 and character.isprintable() and not (
                mods - {"alt", "meta", "shift"}):
            inner = character
        else:
            inner = _key_text(rest, None if mods - {"alt", "meta"} else character, app_cursor)
        return None if inner is None else ESC + inner
    if mods == {"ctrl"} and len(base) == 1:
        c = base.lower()
        if "a" <= c <= "z":
            return chr(ord(c) - 96)
        if c in "@[\\]^_":
            return chr(ord(c) ^ 0x40)
        if c == " ":
            return "\x00"
    if mods == {"ctrl", "shift"} and len(base) == 1 and "a" <= base.lower() <= "z":
        return chr(ord(base.lower()) - 96)
    if character and character.isprintable():
        return character
    if character and len(character) == 1 and ord(character) < 0x20:
        return character
    return None


SPECIAL_KEYS: dict[str, bytes] = {
    "esc": b"\x1b",
    "tab": b"\t",
    "ctrl+c": b"\x03",
    "ctrl+d": b"\x04",
    "ctrl+z": b"\x1a",
    "ctrl+\\": b"\x1c",
    "ctrl+]": b"\x1d",
    **{f"f{n}": key_to_bytes(f"f{n}") for n in range(1, 13)},  # type: ignore[misc]
}
"""Byte sequences a special-keys menu can send. Ctrl+Alt+Del and SysRq are not byte
sequences on a serial or pty console (the caller must use the backend: ACPI, QMP
``send-key``, a serial BREAK), so they are not here."""


def special_key_bytes(name: str) -> bytes:
    """The bytes of a :data:`SPECIAL_KEYS` entry.

    Raises:
        KeyError: not a key that has a byte sequence (e.g. ``ctrl+alt+del``).
    """
    return SPECIAL_KEYS[name.lower()]


_KEY_LABELS = {
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "backslash": "\\",
    "circumflex_accent": "^",
    "underscore": "_",
}


def key_label(key: str) -> str:
    """A short label for a Textual key name: ``ctrl+right_square_bracket`` -> ``ctrl+]``."""
    return "+".join(_KEY_LABELS.get(p, p) for p in key.split("+"))
