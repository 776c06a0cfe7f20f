"""VGA text mode, read from guest memory: decode the 0xB8000 buffer and the BIOS data
area into a terminal byte stream, and turn terminal input into QEMU key codes.

Facts (docs/protocols.md, "VGA text"): cells are ``(char, attr)`` pairs, chars in code page
437, ``fg = attr & 15``, ``bg = (attr >> 4) & 7``; VGA colour 1 is blue where ANSI 4 is,
so the R and B bits swap. The BIOS data area (0x400) holds the video mode (0x449), the
columns (0x44A), the rows minus one (0x484), the cursor of page 0 (0x450) and the
cursor shape (0x460). Linux' vgacon does not keep the BIOS data area and scrolls with
the CRTC start address, which memory does not show — this reader is for firmware,
boot loaders and installers that draw through the BIOS.
"""

from __future__ import annotations

from dataclasses import dataclass

TEXT_BASE = 0xB8000
MONO_BASE = 0xB0000
BDA = 0x400
BDA_SIZE = 0x100

# CP437 glyphs for 0x00-0x1F (Python's cp437 codec maps them to control characters).
_LOW = " ☺☻♥♦♣♠•◘○◙♂♀♪♫☼►◄↕‼¶§▬↨↑↓→←∟↔▲▼"
_CP437 = [_LOW[i] if i < 32 else bytes([i]).decode("cp437") for i in range(256)]
_CP437[0x7F] = "⌂"


def vga_to_ansi(colour: int) -> int:
    """VGA colour index (0-7) to the ANSI index: swap the red and blue bits."""
    return (colour & 2) | ((colour & 1) << 2) | ((colour & 4) >> 2)


def _sgr(attr: int) -> str:
    fg, bg = attr & 15, (attr >> 4) & 7
    fg_code = (90 if fg & 8 else 30) + vga_to_ansi(fg & 7)
    return f"\x1b[0;{fg_code};{40 + vga_to_ansi(bg)}m"


@dataclass(frozen=True)
class TextMode:
    columns: int
    rows: int
    base: int
    cursor: tuple[int, int] | None  # (row, column), None when hidden
    text: bool

    @property
    def size(self) -> int:
        return self.columns * self.rows * 2


def parse_bda(bda: bytes) -> TextMode:
    """What the BIOS data area says about the screen."""
    mode = bda[0x49] & 0x7F
    columns = int.from_bytes(bda[0x4A:0x4C], "little") or 80
    rows = (bda[0x84] + 1) if bda[0x84] else 25
    if columns not in (40, 80, 132) or not 20 <= rows <= 60:
        columns, rows = 80, 25
    col, row = bda[0x50], bda[0x51]
    shape = int.from_bytes(bda[0x60:0x62], "little")
    hidden = bool(shape & 0x2000) or row >= rows or col >= columns
    text = mode in (0, 1, 2, 3, 7)
    return TextMode(columns, rows, MONO_BASE if mode == 7 else TEXT_BASE,
                    None if hidden else (row, col), text)


def render_rows(buffer: bytes, mode: TextMode) -> list[str]:
    """Each screen row as a terminal string (SGR + text), positioned absolutely."""
    rows = []
    width = mode.columns
    for y in range(mode.rows):
        line = buffer[y * width * 2:(y + 1) * width * 2]
        parts = [f"\x1b[{y + 1};1H"]
        current = -1
        for x in range(0, len(line) - 1, 2):
            ch, attr = line[x], line[x + 1] & 0x7F  # bit 7: blink, not shown
            if attr != current:
                parts.append(_sgr(attr))
                current = attr
            parts.append(_CP437[ch])
        rows.append("".join(parts))
    return rows


class VGAScreen:
    """Diffs successive reads of text memory into the smallest terminal update."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.cells: list[bytes] = []
        self.mode: TextMode | None = None
        self.cursor: tuple[int, int] | None = None
        self.graphics = False

    def update(self, bda: bytes, memory: bytes | None) -> bytes:
        """Return the terminal bytes that bring a viewer from the last frame to this one."""
        mode = parse_bda(bda)
        out: list[str] = []
        if not mode.text:
            if not self.graphics:
                self.graphics = True
                self.rows = []
                self.cells = []
                out.append("\x1b[0m\x1b[2J\x1b[1;1H\x1b[?25l"
                           "The guest left VGA text mode (graphics): detach "
                           "and press V for its graphical screen.")
            return "".join(out).encode()
        assert memory is not None
        if (self.graphics or self.mode is None
                or (mode.columns, mode.rows) != (self.mode.columns, self.mode.rows)):
            out.append("\x1b[0m\x1b[2J")
            self.rows = []
            self.cells = []
        self.graphics = False
        self.mode = mode
        width = mode.columns * 2
        cells = [memory[y * width:(y + 1) * width] for y in range(mode.rows)]
        rows = render_rows(memory[:mode.size], mode)
        shift = _scrolled_by(self.cells, cells) if self.rows else 0
        if shift:
            # The screen scrolled (BIOS teletype output): scroll the viewer too, so the
            # lines that left the top go to its scrollback instead of vanishing.
            out.append(f"\x1b[0m\x1b[{mode.rows};1H" + "\n" * shift)
            blank = "\x1b[0m"
            self.rows = [r for r in self.rows[shift:]] + [blank] * shift
            self.cells = self.cells[shift:] + [b""] * shift
        for y, row in enumerate(rows):
            if y >= len(self.cells) or self.cells[y] != cells[y]:
                out.append(row)
        self.rows = rows
        self.cells = cells
        if out or mode.cursor != self.cursor:
            if mode.cursor is None:
                out.append("\x1b[?25l")
            else:
                out.append(f"\x1b[{mode.cursor[0] + 1};{mode.cursor[1] + 1}H\x1b[?25h")
            self.cursor = mode.cursor
        return "".join(out).encode()

    def full(self) -> bytes:
        """The whole current screen, for a viewer that just attached."""
        if self.graphics:
            return ("\x1b[0m\x1b[2J\x1b[1;1H\x1b[?25lThe guest left VGA text mode "
                    "(graphics): detach and press V for its graphical screen.").encode()
        if self.mode is None:
            return b""
        out = ["\x1b[0m\x1b[2J", *self.rows]
        if self.cursor is None:
            out.append("\x1b[?25l")
        else:
            out.append(f"\x1b[{self.cursor[0] + 1};{self.cursor[1] + 1}H\x1b[?25h")
        return "".join(out).encode()


def _blank(line: bytes) -> bool:
    return all(ch in (0, 0x20) for ch in line[::2])


def _scrolled_by(old: list[bytes], new: list[bytes]) -> int:
    """How many lines ``new`` is ``old`` scrolled up by (0: not a scroll)."""
    rows = len(new)
    if len(old) != rows or old == new:
        return 0
    for k in range(1, rows - 2):
        if new[:rows - k] == old[k:] and not all(_blank(line) for line in old[:k]) \
                and not all(_blank(line) for line in new[:rows - k]):
            return k
    return 0


# Terminal input -> QEMU qcodes -------------------------------------------------------

_PLAIN = {
    " ": "spc", "-": "minus", "=": "equal", "[": "bracket_left", "]": "bracket_right",
    ";": "semicolon", "'": "apostrophe", "`": "grave_accent", "\\": "backslash",
    ",": "comma", ".": "dot", "/": "slash", "\r": "ret", "\n": "ret", "\t": "tab",
    "\x7f": "backspace", "\x08": "backspace", "\x1b": "esc",
}
_SHIFTED = {
    "!": "1", "@": "2", "#": "3", "$": "4", "%": "5", "^": "6", "&": "7", "*": "8",
    "(": "9", ")": "0", "_": "minus", "+": "equal", "{": "bracket_left",
    "}": "bracket_right", ":": "semicolon", '"': "apostrophe", "~": "grave_accent",
    "|": "backslash", "<": "comma", ">": "dot", "?": "slash",
}
_SEQUENCES = {
    "\x1b[A": ["up"], "\x1b[B": ["down"], "\x1b[C": ["right"], "\x1b[D": ["left"],
    "\x1bOA": ["up"], "\x1bOB": ["down"], "\x1bOC": ["right"], "\x1bOD": ["left"],
    "\x1b[H": ["home"], "\x1b[F": ["end"], "\x1bOH": ["home"], "\x1bOF": ["end"],
    "\x1b[1~": ["home"], "\x1b[4~": ["end"], "\x1b[2~": ["insert"], "\x1b[3~": ["delete"],
    "\x1b[5~": ["pgup"], "\x1b[6~": ["pgdn"], "\x1b[Z": ["shift", "tab"],
    "\x1bOP": ["f1"], "\x1bOQ": ["f2"], "\x1bOR": ["f3"], "\x1bOS": ["f4"],
    "\x1b[15~": ["f5"], "\x1b[17~": ["f6"], "\x1b[18~": ["f7"], "\x1b[19~": ["f8"],
    "\x1b[20~": ["f9"], "\x1b[21~": ["f10"], "\x1b[23~": ["f11"], "\x1b[24~": ["f12"],
}
_LONGEST = max(len(s) for s in _SEQUENCES)


def keys_for_input(data: bytes) -> list[list[str]]:
    """Split terminal input into QEMU key chords (each a list of qcodes pressed together).
    Characters with no key on a US keyboard are skipped."""
    text = data.decode("utf-8", errors="ignore")
    chords: list[list[str]] = []
    i = 0
    while i < len(text):
        if text[i] == "\x1b":
            for n in range(min(_LONGEST, len(text) - i), 1, -1):
                seq = _SEQUENCES.get(text[i:i + n])
                if seq is not None:
                    chords.append(seq)
                    i += n
                    break
            else:
                if i + 1 < len(text) and text[i + 1] != "\x1b":  # alt+key
                    inner = keys_for_input(text[i + 1].encode())
                    if inner:
                        chords.append(["alt", *inner[0]])
                        i += 2
                        continue
                chords.append(["esc"])
                i += 1
            continue
        ch = text[i]
        i += 1
        if ch in _PLAIN:
            chords.append([_PLAIN[ch]])
        elif "a" <= ch <= "z" or "0" <= ch <= "9":
            chords.append([ch])
        elif "A" <= ch <= "Z":
            chords.append(["shift", ch.lower()])
        elif ch in _SHIFTED:
            chords.append(["shift", _SHIFTED[ch]])
        elif "\x01" <= ch <= "\x1a":
            chords.append(["ctrl", chr(ord(ch) + 96)])
        elif ch == "\x00":
            chords.append(["ctrl", "spc"])
    return chords


SPECIAL_CHORDS = {
    "ctrl+alt+del": ["ctrl", "alt", "delete"],
    **{f"ctrl+alt+f{n}": ["ctrl", "alt", f"f{n}"] for n in range(1, 13)},
    "sysrq": ["alt", "sysrq"],
}
