"""The byte-stream parser of the console terminal: the states of an ECMA-48 / DEC terminal
as xterm implements them (ground, escape, escape intermediate, CSI, OSC and the
DCS/SOS/PM/APC strings), dispatching to the screen (``screen.py``).

It replaces pyte's parser, which printed DCS/APC/PM/SOS strings as text, swallowed an ESC that
arrived inside a CSI sequence and printed the rest, ignored charset designations in UTF-8
mode, mis-read ``CSI >``/``CSI =``/intermediate bytes and colon parameters, and took NEL for
a plain line feed. Rules followed (xterm's, which tmux shares unless said otherwise):

- C0 controls are executed wherever they arrive, also in the middle of an escape or CSI
  sequence (vttest checks this); CAN and SUB cancel a sequence; DEL and C1 code points are
  ignored (a UTF-8 terminal takes 8-bit controls only as bytes), and so are bidi overrides:
  no cell holds a character that would act on the host terminal.
- ESC inside any sequence abandons it and starts a new one; inside a string it ends the string
  (``ESC \\`` is ST).
- OSC ends with BEL or ST; DCS, SOS, PM and APC end with ST only and are consumed whole.
- A CSI sequence whose parameters hold a private marker anywhere but first is ignored.
- The state survives the end of a chunk: a sequence cut by a read completes with the next one.

Pure logic, no Textual.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .screen import Screen

_TEXT = re.compile(r"[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]+")
"""What is drawn. Bidi embeddings, overrides and isolates are not (they have no width, and
in a cell they would reorder the host terminal's line, corral's own text on it too)."""
_CSI = re.compile(r"\x1b\[([0-?]*)([ -/]*)([@-~])")
_ESC = re.compile(r"\x1b([ -/]*)([0-Z\\-~])")  # "[" excluded; "]PX^_" are taken first
_OSC_END = re.compile(r"[\x07\x18\x1a\x1b\x9c]")
_STRING_END = re.compile(r"[\x18\x1a\x1b\x9c]")
_STRINGS = {"]": "osc", "P": "dcs", "X": "sos", "^": "pm", "_": "apc"}
_MAX_PENDING = 256
_MAX_PARAMS = 30
"""Parameters of a CSI sequence acted on (xterm's NPARAM; what follows is ignored)."""
_MAX_NUMBER = 65535
"""A parameter's value is clamped to this (xterm's MAX_I_PARAM), then to the screen."""
_CSI_HEAD = re.compile(r"\x1b\[[0-?]*")
_MAX_OSC = 4096

_CONTROLS = {
    "\x07": "bell", "\x08": "backspace", "\x09": "tab", "\x0a": "linefeed",
    "\x0b": "linefeed", "\x0c": "linefeed", "\x0d": "carriage_return",
    "\x0e": "shift_out", "\x0f": "shift_in",
}

def _number(digits: str) -> int:
    """A CSI parameter's value, clamped (no conversion of thousands of digits)."""
    if not digits.isdigit():
        return 0
    digits = digits.lstrip("0")  # leading zeros are allowed, and as many as sent
    if len(digits) > 5:
        return _MAX_NUMBER
    return min(int(digits), _MAX_NUMBER) if digits else 0


# CSI final -> screen method, for sequences without a private marker or intermediates.
_CSI_METHODS = {
    "@": "insert_characters", "A": "cursor_up", "B": "cursor_down", "C": "cursor_forward",
    "D": "cursor_back", "E": "cursor_down1", "F": "cursor_up1", "G": "cursor_to_column",
    "H": "cursor_position", "I": "forward_tab", "J": "erase_in_display",
    "K": "erase_in_line", "L": "insert_lines", "M": "delete_lines", "P": "delete_characters",
    "S": "scroll_up", "X": "erase_characters", "Z": "back_tab", "`": "cursor_to_column",
    "a": "cursor_forward", "b": "repeat_last", "c": "report_device_attributes",
    "d": "cursor_to_line", "e": "cursor_down", "f": "cursor_position", "g": "clear_tab_stop",
    "h": "set_mode", "l": "reset_mode", "n": "report_device_status", "r": "set_margins",
}

# ESC final (no intermediate) -> screen method.
_ESC_METHODS = {
    "7": "save_cursor", "8": "restore_cursor", "D": "index", "E": "next_line",
    "M": "reverse_index", "H": "set_tab_stop", "c": "reset",
}


class Parser:
    """Feeds decoded text to a :class:`~tui.terminal.screen.Screen`."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self._pending = ""  # an escape/CSI sequence cut by the end of the last chunk
        self._string: str | None = None  # inside an OSC/DCS/SOS/PM/APC string
        self._osc: list[str] = []
        self._osc_len = 0
        self._controls = {c: getattr(screen, name) for c, name in _CONTROLS.items()}
        self._csi_methods = {f: getattr(screen, name) for f, name in _CSI_METHODS.items()}
        self._esc_methods = {f: getattr(screen, name) for f, name in _ESC_METHODS.items()}

    @property
    def ground(self) -> bool:
        """No sequence or string is in progress."""
        return not self._pending and self._string is None

    def reset(self) -> None:
        """Back to the ground state (what is in progress is dropped)."""
        self._pending = ""
        self._string = None
        self._osc = []
        self._osc_len = 0

    # -- the main loop ---------------------------------------------------------------------

    def feed(self, text: str) -> None:
        if self._pending:
            text = self._pending + text
            self._pending = ""
        pos = 0
        if self._string is not None:
            pos = self._in_string(text, 0)
        n = len(text)
        draw = self.screen.draw
        match_text = _TEXT.match
        controls = self._controls
        while pos < n:
            m = match_text(text, pos)
            if m is not None:
                pos = m.end()
                draw(m.group())
                continue
            c = text[pos]
            if c == "\x1b":
                pos = self._escape(text, pos)
                continue
            handler = controls.get(c)
            if handler is not None:
                handler()
            pos += 1  # NUL, DEL, other C0 and C1: ignored

    def _escape(self, text: str, pos: int) -> int:
        """Parse the sequence starting with the ESC at ``pos``; returns where to go on."""
        if pos + 1 >= len(text):
            self._pending = "\x1b"
            return len(text)
        c1 = text[pos + 1]
        if c1 == "[":
            m = _CSI.match(text, pos)
            if m is not None:
                self._csi(*m.groups())
                return m.end()
            return self._slow(text, pos)
        kind = _STRINGS.get(c1)
        if kind is not None:
            return self._start_string(kind, text, pos + 2)
        m = _ESC.match(text, pos)
        if m is not None:
            self._esc(*m.groups())
            return m.end()
        return self._slow(text, pos)

    def _slow(self, text: str, pos: int) -> int:
        """A sequence holding controls, interrupted or cut by the end of the chunk: parsed
        character by character from the ESC at ``pos``."""
        n = len(text)
        seq = "\x1b"
        csi = False
        i = pos + 1
        while i < n:
            c = text[i]
            i += 1
            if c == "\x1b":  # abandon what was collected, start again
                seq = "\x1b"
                csi = False
                continue
            if c == "\x18" or c == "\x1a":  # CAN, SUB: cancel
                return i
            if c < " ":
                handler = self._controls.get(c)
                if handler is not None:
                    handler()
                continue
            if c == "\x7f":
                continue
            if csi:
                if "@" <= c <= "~":
                    m = _CSI.match(seq + c)
                    if m is not None:
                        self._csi(*m.groups())
                    return i  # parameters after intermediates: ignored, as xterm does
                if " " <= c <= "?":
                    seq += c
                    continue
                return i  # not ASCII: the sequence is dropped
            if c == "[" and seq == "\x1b":
                seq += c
                csi = True
                continue
            if seq == "\x1b" and c in _STRINGS:
                return self._start_string(_STRINGS[c], text, i)
            if " " <= c <= "/":
                seq += c
                continue
            if "0" <= c <= "~":
                self._esc(seq[1:], c)
            return i
        if len(seq) <= _MAX_PENDING:
            self._pending = seq
        elif csi and _CSI_HEAD.fullmatch(seq):
            # parameters longer than anything a program means (a stream gone wrong): only
            # their head is kept, and the sequence still ends at its final byte, so that
            # neither its tail nor the text after it is lost (xterm reads on, too)
            self._pending = seq[:_MAX_PENDING]
        return n

    # -- strings ---------------------------------------------------------------------------

    def _start_string(self, kind: str, text: str, pos: int) -> int:
        self._string = kind
        self._osc = []
        self._osc_len = 0
        return self._in_string(text, pos)

    def _in_string(self, text: str, pos: int) -> int:
        osc = self._string == "osc"
        m = (_OSC_END if osc else _STRING_END).search(text, pos)
        end = len(text) if m is None else m.start()
        if osc and self._osc_len < _MAX_OSC:
            part = text[pos:end][: _MAX_OSC - self._osc_len]
            self._osc.append(part)
            self._osc_len += len(part)
        if m is None:
            return end
        c = text[end]
        self._string = None
        if osc and c not in "\x18\x1a":
            self._osc_dispatch("".join(self._osc))
        self._osc = []
        return end if c == "\x1b" else end + 1  # ESC: ST or a new sequence, parsed next

    def _osc_dispatch(self, body: str) -> None:
        code, _, arg = body.partition(";")
        if code in ("0", "2"):
            self.screen.set_title(arg)
        if code in ("0", "1"):
            self.screen.set_icon_name(arg)
        # Colours (4, 10-19, 104...), hyperlinks (8), clipboard (52): consumed, not used.

    # -- dispatch --------------------------------------------------------------------------

    def _esc(self, inter: str, final: str) -> None:
        s = self.screen
        if not inter:
            method = self._esc_methods.get(final)
            if method is not None:
                method()
            elif final in "NO":
                s.single_shift(2 if final == "N" else 3)
            elif final in "no":
                s.locking_shift(2 if final == "n" else 3)
            # ESC = / ESC > (keypad modes), ESC \ (ST) and the rest: nothing to do.
            return
        lead = inter[0]
        if lead in "()*+" and len(inter) == 1:
            s.designate("()*+".index(lead), final)
        elif lead in "-./" and len(inter) == 1:
            s.designate("-./".index(lead) + 1, final, size96=True)  # 96-character sets
        elif inter == "#" and final == "8":
            s.alignment_display()
        # ESC # 3-6 (double-height/width lines) are drawn single size, like tmux does;
        # ESC % (UTF-8 on/off), ESC SP F/G (7/8-bit controls): ignored, the stream is UTF-8.

    def _csi(self, params: str, inter: str, final: str) -> None:
        s = self.screen
        prefix = ""
        if params and params[0] in "<=>?":
            prefix, params = params[0], params[1:]
        if "<" in params or "=" in params or ">" in params or "?" in params:
            return  # a private marker in the middle: ignored (xterm)
        if inter:
            if inter == "!" and final == "p" and not prefix:
                s.soft_reset()  # DECSTR
            return  # DECSCUSR, DECSCA, DECRQM...: nothing to show
        if final == "m":
            if not prefix:
                s.sgr(params)
            return  # CSI > 4 ; 2 m (modifyOtherKeys) and friends
        if ":" in params:
            return
        args = [_number(p) for p in params.split(";")[:_MAX_PARAMS]] if params else []
        if prefix == "?":
            if final in "hl":
                (s.set_mode if final == "h" else s.reset_mode)(*args, private=True)
            elif final == "J":
                s.erase_in_display(*args[:1])  # DECSED: no protected cells, so as ED
            elif final == "K":
                s.erase_in_line(*args[:1])  # DECSEL
            elif final == "n":
                s.report_device_status(*args[:1], private=True)
            elif final == "W" and args[:1] in ([], [0], [5]):
                s.reset_tab_stops()  # DECST8C (xterm: 5 or none; other values do nothing)
            return
        if prefix == ">":
            if final == "c":
                s.report_secondary_attributes()
            return
        if prefix:
            return
        if final == "s":
            if not args:
                s.save_cursor()  # SCOSC (with parameters it is DECSLRM: no margins here)
            return
        if final == "u":
            if not args:
                s.restore_cursor()  # SCORC
            return
        if final == "T":
            if len(args) <= 1:
                s.scroll_down(*args)  # SD; five parameters are a mouse-tracking request
            return
        method = self._csi_methods.get(final)
        if method is None:
            return  # window operations, DECLL, ...: ignored
        if final in "JKcn":
            args = args[:1]
        elif final in "Hfr":
            args = args[:2]
        elif final not in "hl":
            args = args[:1]
        method(*args)
