"""Console edge cases where xterm's behaviour is documented (ctlseqs, vttest) and corral's
emulator must show exactly what xterm shows: each a corpus stream (``xterm_*.bin``, written
by make_corpus.py), the screen xterm shows for it at 120x40, and, where tmux shows
something else, why tmux is wrong (those are counted apart by the corpus comparisons).

Rows are numbered from 1 as in CUP; every row not given is blank."""

from __future__ import annotations

CSI = "\x1b["
W = 120


def at(row: int, col: int = 1) -> str:
    return f"{CSI}{row};{col}H"


def _pending_wrap() -> tuple[str, dict[int, str]]:
    """A character written in the last column leaves the cursor there, its wrap pending
    (ctlseqs: DECAWM); a cursor or erase control that follows acts from that column and
    cancels the wrap, so the next character does not go to the next line."""
    line = "a" * (W - 1)
    s = CSI + "2J"
    rows = {}
    cases = (
        ("X" + CSI + "D" + "Y", line[:-1] + "YX"),     # CUB 1: back to column 119
        ("X\bY", line[:-1] + "YX"),                     # BS: the same
        ("X" + CSI + "K" + "Z", line + "Z"),            # EL: erases the last cell, Z in it
        ("X" + CSI + "C" + "W", line + "W"),            # CUF at the margin: stays, W over X
        ("X" + CSI + "1X" + "V", line + "V"),           # ECH: the same cell
        ("X\rR", "R" + line[1:] + "X"),                 # CR: column 1 of the same row
        ("X" + CSI + "2G" + "G", "aG" + line[2:] + "X"),  # CHA
    )
    for i, (tail, want) in enumerate(cases):
        row = 1 + 2 * i
        s += at(row) + line + tail
        rows[row] = want
    return s, rows


def _wide_overwrite() -> tuple[str, dict[int, str]]:
    """Writing over one half of a wide character blanks its other half, and only that cell
    (xterm's ClearCells of the split character)."""
    s = CSI + "2J"
    s += at(1) + "ab漢cd" + at(1, 3) + "X"      # first half
    s += at(2) + "ab漢cd" + at(2, 4) + "Y"      # second half
    s += at(3) + "ab漢字cd" + at(3, 4) + "Z"    # second half of one beside another
    edge = "b" * (W - 2)
    s += at(4) + edge + "漢" + at(4, W) + "E"  # the right edge: its second half
    s += at(5) + edge + "漢" + at(5, W - 1) + "F"  # the right edge: its first half
    s += at(6) + "b" * (W - 1) + "字" + "\r\n"  # a wide character that does not fit wraps
    rows = {1: "abX cd", 2: "ab Ycd", 3: "ab Z字cd", 4: edge + " E", 5: edge + "F",
            6: "b" * (W - 1), 7: "字"}
    return s, rows


def _huge_parameter() -> tuple[str, dict[int, str]]:
    """A parameter too big for any counter is clamped (xterm: to 65535 and then to the
    screen); the sequence ends at its final byte and the text after it is shown. Thousands
    of digits: more than any buffer a parser keeps for a sequence cut between reads."""
    big = "9" * 5000
    s = CSI + "2J" + at(1) + CSI + big + "m" + "after SGR" + CSI + "0m"
    s += at(2) + CSI + big + "C" + "|"         # CUF: to the last column
    s += at(3) + "abc" + CSI + big + "D" + "<"  # CUB: to column 1
    s += at(4) + CSI + "1;" + big + "H" + "*"  # CUP: column clamped
    s += at(5) + "after CUP"
    s += at(6) + "0123456789" + CSI + "1;" + big + "r" + at(6, 11) + "after DECSTBM"
    s += CSI + "r" + at(7) + "xyz" + CSI + big + "P" + "after DCH"
    rows = {1: "after SGR".ljust(W - 1) + "*", 2: " " * (W - 1) + "|", 3: "<bc",
            5: "after CUP", 6: "0123456789after DECSTBM", 7: "xyzafter DCH"}
    return s, rows


def _tabs_cht() -> tuple[str, dict[int, str]]:
    """CHT (``CSI n I``) moves to the n-th next tab stop as set now: after TBC and HTS, the
    stops set (ctlseqs: CSI Ps I, ESC H, CSI 3 g); past the last stop, the last column."""
    s = CSI + "2J" + CSI + "3g"                         # no stops at all
    s += at(1, 10) + "\x1bH" + at(1, 30) + "\x1bH" + at(1, 55) + "\x1bH"
    s += at(1) + CSI + "I" + "A" + CSI + "I" + "B"      # to 10, then to 30
    s += at(2) + CSI + "2I" + "C"                       # the second stop: 30
    s += at(3) + CSI + "3I" + "D"                       # the third: 55
    s += at(4) + CSI + "9I" + "E"                       # past the last: the last column
    s += at(5, 30) + CSI + "g" + at(5) + CSI + "2I" + "F"  # 30 cleared: 10, 55
    s += at(6) + CSI + "I" + CSI + "Z" + "G"            # CHT then CBT: back to column 1
    rows = {1: " " * 9 + "A" + " " * 19 + "B", 2: " " * 29 + "C", 3: " " * 54 + "D",
            4: " " * (W - 1) + "E", 5: " " * 54 + "F", 6: "G"}
    return s, rows


def _tabs_reset_cht() -> tuple[str, dict[int, str]]:
    """DECST8C (``CSI ? 5 W``, ctlseqs: 'Reset tab stops to start with column 9, every 8
    columns (DECST8C), VT510') drops every stop set before and sets one every 8 columns,
    which CHT and HT then use; with no parameter (or 0) the same, with another nothing
    (xterm's charproc.c, CASE_DECST8C, as a VT510/VT520: ``xterm -ti vt520``)."""
    s = CSI + "2J" + CSI + "3g" + at(1, 5) + "\x1bH"   # one stop only, at column 5
    s += CSI + "?5W"                                   # DECST8C: 9, 17, 25, ...
    s += at(1) + CSI + "I" + "A" + CSI + "2I" + "B"    # to 9, then two stops on: 25
    s += at(2) + "ab\tC"                               # HT: 9 (the stop at 5 is gone)
    s += CSI + "3g" + CSI + "?W"                       # cleared, then reset (no parameter)
    s += at(3) + CSI + "3I" + "D"                      # the third stop: 25
    s += CSI + "3g" + CSI + "?4W"                      # cleared; 4 resets nothing
    s += at(4) + CSI + "I" + "E"                       # no stop: the last column
    rows = {1: " " * 8 + "A" + " " * 15 + "B", 2: "ab" + " " * 6 + "C", 3: " " * 24 + "D",
            4: " " * (W - 1) + "E"}
    return s, rows


def _zero_width_and_emoji() -> tuple[str, dict[int, str]]:
    """Widths as xterm takes them, one code point at a time (its wcwidth): emoji are two
    columns, a ZWJ sequence is its emoji side by side, a flag is its two regional
    indicators of one column each, VS16 and ZWJ/ZWNJ/ZWSP take no column (kept in the
    cell before, drawn as nothing)."""
    s = CSI + "2J"
    back = "\b\b<"  # two columns back and a mark: where it lands shows the widths
    s += at(1) + "a\u200bb\u200cc\u200dd|" + back                  # ZWSP, ZWNJ, ZWJ
    s += at(2) + "\U0001F468\u200d\U0001F469\u200d\U0001F467|" + back  # three emoji
    s += at(3) + "\U0001F1E9\U0001F1EA|" + back                     # flag DE: two cells
    s += at(4) + "\u2764\ufe0f|" + back                             # heart + VS16: one
    rows = {1: "abc<|", 2: "\U0001F468\U0001F469 <|", 3: "\U0001F1E9<|", 4: "<|"}
    return s, rows


def _hpr_vpr_conceal() -> tuple[str, dict[int, str]]:
    """HPR (``CSI n a``) and VPR (``CSI n e``) move like CUF and CUD (ctlseqs; vttest's
    ISO 6429 menu draws boxes with them); concealed text (SGR 8) is not shown."""
    s = CSI + "2J" + at(1) + "a" + CSI + "3a" + "b"
    s += at(2) + "c" + CSI + "2e" + "d"
    s += at(6) + "shown " + CSI + "8m" + "secret" + CSI + "28m" + " shown"
    rows = {1: "a   b", 2: "c", 4: " d", 6: "shown        shown"}
    return s, rows


CASES: dict[str, tuple] = {
    "xterm_pending_wrap": _pending_wrap,
    "xterm_wide_overwrite": _wide_overwrite,
    "xterm_huge_parameter": _huge_parameter,
    "xterm_tabs_cht": _tabs_cht,
    "xterm_tabs_reset_cht": _tabs_reset_cht,
    "xterm_zero_width_emoji": _zero_width_and_emoji,
    "xterm_hpr_vpr_conceal": _hpr_vpr_conceal,
}


def stream(name: str) -> bytes:
    return CASES[name]()[0].encode()


def expected(name: str, height: int = 40) -> list[str]:
    rows = CASES[name]()[1]
    return [rows.get(r, "") for r in range(1, height + 1)]


TMUX_WRONG: dict[str, str] = {
    "xterm_pending_wrap": "tmux keeps the cursor one column past the last while a wrap is "
                          "pending: BS/CUB land one column too far right, EL/ECH erase "
                          "nothing and the next character wraps; xterm acts on the last "
                          "column and cancels the wrap (ctlseqs: DECAWM; vttest cursor menu: "
                          "'the left/right margins should have letters in order')",
    "xterm_huge_parameter": "tmux drops a CSI sequence whose parameter overflows; xterm "
                            "clamps a parameter to 65535 (charproc.c MAX_I_PARAM) and then to "
                            "the screen, and acts on the sequence",
    "xterm_tabs_cht": "tmux has no CHT (ctlseqs: CSI Ps I, Cursor Forward Tabulation; vttest "
                      "ISO 6429 menu: 'the lines with *'s above should look the same')",
    "xterm_tabs_reset_cht": "tmux has neither DECST8C (ctlseqs: CSI ? 5 W, 'Reset tab stops "
                            "to start with column 9, every 8 columns (DECST8C), VT510') nor "
                            "CHT (ctlseqs: CSI Ps I)",
    "xterm_zero_width_emoji": "tmux 3.3 joins an emoji that follows a ZWJ into the cell "
                              "before it; xterm gives each code point its own width (its "
                              "wcwidth), the ZWJ none",
    "xterm_hpr_vpr_conceal": "tmux has no HPR (CSI Pn a) or VPR (CSI Pn e) (ctlseqs; vttest "
                             "ISO 6429 menu draws boxes with them) and shows concealed text "
                             "(ctlseqs: SGR 8, 'Invisible, i.e., hidden (VT300)')",
}
"""Corpus streams on which tmux shows something else than xterm, and why."""
