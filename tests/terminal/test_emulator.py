"""TerminalEmulator: queries, UTF-8, pyte's red flags, alternate screen, scrollback, fast path."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tui.terminal.emulator import (
    ANSI_DARK,
    ANSI_LIGHT,
    DEFAULT_KEY,
    Selection,
    TerminalEmulator,
    ansi_palette,
)

CORPUS = Path(__file__).resolve().parent / "corpus"


def make(columns=40, lines=10, **kw) -> tuple[TerminalEmulator, list[bytes]]:
    answers: list[bytes] = []
    return TerminalEmulator(columns, lines, respond=answers.append, **kw), answers


# -- queries ----------------------------------------------------------------------------------


def test_cursor_position_report_has_the_row_and_column():
    emu, answers = make()
    emu.feed(b"\r\n\r\nabc\x1b[6n")
    assert answers == [b"\x1b[3;4R"]


def test_cursor_position_report_after_cursor_addressing():
    emu, answers = make()
    emu.feed(b"\x1b[7;22H\x1b[6n")
    assert answers == [b"\x1b[7;22R"]


def test_status_and_device_attributes():
    emu, answers = make()
    emu.feed(b"\x1b[5n\x1b[c\x1b[0c\x1b[>c\x1b[>0c")
    assert answers == [b"\x1b[0n", b"\x1b[?62;22c", b"\x1b[?62;22c",
                       b"\x1b[>1;10;0c", b"\x1b[>1;10;0c"]
    assert emu.screen_text()[0] == ""


def test_query_split_across_chunks_is_answered_once():
    emu, answers = make()
    for b in b"ab\x1b[6n":
        emu.feed(bytes([b]))
    assert answers == [b"\x1b[1;3R"]


# -- UTF-8 ------------------------------------------------------------------------------------

TEXT = "héllo wörld — 中文 ✓ ок\r\n"


@pytest.mark.parametrize("cut", range(1, len(TEXT.encode())))
def test_utf8_split_at_every_byte(cut):
    data = TEXT.encode()
    emu, _ = make()
    emu.feed(data[:cut])
    emu.feed(data[cut:])
    assert emu.screen_text()[0] == TEXT.strip()


def test_utf8_one_byte_at_a_time():
    emu, _ = make()
    for b in TEXT.encode():
        emu.feed(bytes([b]))
    assert emu.screen_text()[0] == TEXT.strip()


def test_invalid_utf8_and_garbage_never_raise():
    rng = random.Random(5)
    emu, _ = make(20, 5)
    for _ in range(300):
        emu.feed(bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))))
    emu.feed(b"\x1b[0m\x1b[2J\x1b[Hstill alive")
    assert emu.screen_text()[0] == "still alive"


def test_malformed_sequences_are_dropped_not_fatal():
    emu, _ = make()
    emu.feed("\x1b[1;2;3;4;5A\x1b[²A\x1b[?6n\x1b[999999999999Hok".encode())
    assert "ok" in "".join(emu.screen_text())


# -- wide and zero-width characters ------------------------------------------------------------


def test_wide_chars_take_two_cells():
    emu, answers = make()
    emu.feed("中文x\x1b[6n".encode())
    assert emu.screen_text()[0] == "中文x"
    assert answers == [b"\x1b[1;6R"]


def test_wide_char_at_last_column_wraps():
    emu, _ = make(10, 4)
    emu.feed(("x" * 9 + "中").encode())
    assert emu.screen_text()[:2] == ["x" * 9, "中"]


@pytest.mark.parametrize("text", [
    "before \U0001F575\ufe0f after",       # VS16
    "a\u200db after",                      # ZWJ
    "family \U0001F468\u200d\U0001F469\u200d\U0001F467 end",
])
def test_zero_width_does_not_drop_the_rest(text):
    emu, _ = make(60, 4)
    emu.feed(text.encode())
    line = emu.screen_text()[0]
    assert line.endswith("after") or line.endswith("end")


def test_combining_character_joins_the_previous_cell():
    emu, answers = make()
    emu.feed("cafe\u0301!\x1b[6n".encode())
    assert emu.screen_text()[0] == "café!"
    assert answers == [b"\x1b[1;6R"]


# -- colon SGR -----------------------------------------------------------------------------------


def test_colon_sgr_leaves_no_digits_and_sets_colours():
    emu, _ = make()
    emu.feed(b"\x1b[38:2::255:100:0mA\x1b[0m \x1b[38:5:33mB\x1b[0m \x1b[4:3mC\x1b[4:0mD")
    assert emu.screen_text()[0] == "A B CD"
    runs = dict((text, key) for text, key in emu.screen_runs()[0])
    assert runs["A"][0] == "#ff6400"
    assert runs["B"][0] == "#0087ff"
    assert runs["C"][4] is True
    assert runs["D"][4] is False


def test_colon_sgr_split_across_chunks():
    emu, _ = make()
    emu.feed(b"x\x1b[38:2::1")
    emu.feed(b":2:3my")
    assert emu.screen_text()[0] == "xy"


def test_modify_other_keys_is_not_sgr():
    emu, _ = make()
    emu.feed(b"\x1b[>4;2mplain")
    ((text, key),) = emu.screen_runs()[0]
    assert text == "plain" and key == DEFAULT_KEY


# -- alternate screen and modes ---------------------------------------------------------------


@pytest.mark.parametrize("mode", [b"1049", b"1047", b"47"])
def test_alternate_screen_restores_the_main_screen(mode):
    emu, _ = make(30, 6)
    emu.feed(b"$ ls\r\nfile1 file2\r\n$ vi")
    main = emu.screen_text()
    emu.feed(b"\x1b[?" + mode + b"h\x1b[H\x1b[2J~\r\n~\r\n\"f\" 2L")
    assert emu.alternate_screen
    assert emu.screen_text()[0] == "~"
    emu.feed(b"\x1b[?" + mode + b"l")
    assert not emu.alternate_screen
    assert emu.screen_text() == main


def test_1049_restores_the_cursor_and_keeps_scrollback_clean():
    emu, answers = make(30, 4)
    emu.feed(b"one\r\ntwo\x1b[6n")
    emu.feed(b"\x1b[?1049h" + b"x\r\n" * 20 + b"\x1b[?1049l\x1b[6n")
    assert answers == [b"\x1b[2;4R", b"\x1b[2;4R"]
    assert emu.history_size == 0


def test_bracketed_paste_and_application_cursor_flags():
    emu, _ = make()
    assert not emu.bracketed_paste and not emu.app_cursor_keys
    emu.feed(b"\x1b[?2004h\x1b[?1h")
    assert emu.bracketed_paste and emu.app_cursor_keys
    emu.feed(b"\x1b[?2004l\x1b[?1l")
    assert not emu.bracketed_paste and not emu.app_cursor_keys


def test_deccolm_keeps_the_width_and_clears_the_screen():
    emu, _ = make(40, 5)
    emu.feed(b"gone\r\nalso\x1b[2;4r\x1b[?3lx")
    assert emu.columns == 40
    assert emu.screen_text() == ["x", "", "", "", ""]
    assert emu.cursor == (1, 0)


# -- scrollback -----------------------------------------------------------------------------------


def test_scrollback_keeps_lines_with_styles():
    emu, _ = make(20, 3)
    emu.feed(b"\x1b[31mred\x1b[0m 1\r\nline 2\r\nline 3\r\nline 4\r\nline 5")
    assert emu.history_text() == ["red 1", "line 2"]
    assert emu.screen_text() == ["line 3", "line 4", "line 5"]
    first = emu.history_runs()[0]
    assert first[0] == ("red", ("red",) + DEFAULT_KEY[1:])


def test_scrollback_limit():
    emu, _ = make(20, 3, scrollback=10)
    emu.feed(b"".join(b"line %d\r\n" % i for i in range(100)))
    assert emu.history_size == 10
    assert emu.history_text()[-1] == "line 97"


def test_scroll_region_does_not_feed_scrollback():
    emu, _ = make(20, 5)
    emu.feed(b"\x1b[2;4r\x1b[4;1H" + b"x\r\n" * 10)
    assert emu.history_size == 0


def test_ed3_clears_scrollback_only():
    emu, _ = make(20, 3)
    emu.feed(b"a\r\nb\r\nc\r\nd\r\ne")
    assert emu.history_size == 2
    emu.feed(b"\x1b[3J")
    assert emu.history_size == 0
    assert emu.screen_text() == ["c", "d", "e"]


def test_view_with_offset_shows_scrollback():
    emu, _ = make(20, 3)
    emu.feed(b"".join(b"line %d\r\n" % i for i in range(10)) + b"$ ")
    def view(offset):
        return ["".join(s.text for s in emu.render_view_line(y, offset, cursor=False))
                for y in range(3)]
    assert view(0) == ["line 8", "line 9", "$"]
    assert view(2) == ["line 6", "line 7", "line 8"]


def test_selection_text_spans_scrollback_and_screen():
    emu, _ = make(20, 3)
    emu.feed(b"alpha beta\r\ngamma\r\ndelta\r\nepsilon")
    # absolute lines: 0 alpha beta (scrollback), 1 gamma, 2 delta, 3 epsilon
    assert emu.selection_text(Selection(0, 6, 2, 3)) == "beta\ngamma\ndel"


def test_resize_smaller_pushes_top_lines_to_scrollback_and_keeps_cursor():
    emu, answers = make(20, 6)
    emu.feed(b"1\r\n2\r\n3\r\n4\r\n5\r\n6")
    emu.resize(10, 3)
    assert emu.screen_text() == ["4", "5", "6"]
    assert emu.history_text() == ["1", "2", "3"]
    emu.feed(b"\x1b[6n")
    assert answers == [b"\x1b[3;2R"]


def test_resize_drops_blank_rows_below_the_cursor_first():
    emu, _ = make(20, 6)
    emu.feed(b"top\r\nprompt$ ")
    emu.resize(20, 3)
    assert emu.screen_text() == ["top", "prompt$", ""]
    assert emu.history_size == 0


# -- dirty rows and rendering ------------------------------------------------------------------


def test_dirty_rows_include_the_cursor_rows():
    emu, _ = make(20, 5)
    emu.take_dirty()
    emu.feed(b"\x1b[3;1Hx")
    assert emu.take_dirty() == {0, 2}
    assert emu.take_dirty() == set()


def test_render_uses_the_palette_and_draws_the_cursor():
    emu, _ = make(20, 3, palette=ANSI_LIGHT)
    emu.feed(b"\x1b[31mR\x1b[33mY\x1b[0m \x1b[38;5;1mI\x1b[38;2;1;2;3mT\x1b[0m")
    segments = emu.render_view_line(0)
    styles = {s.text: s.style for s in segments}
    assert styles["R"].color.triplet.hex == ANSI_LIGHT["red"].lower()
    assert styles["Y"].color.triplet.hex == ANSI_LIGHT["yellow"].lower()  # pyte's "brown"
    assert styles["I"].color.triplet.hex == ANSI_LIGHT["red"].lower()  # 256-colour index 1
    assert styles["T"].color.triplet.hex == "#010203"
    cursor = segments[-1]
    assert cursor.text == " " and cursor.style.reverse
    emu.set_palette(ANSI_DARK)
    styles = {s.text: s.style for s in emu.render_view_line(0)}
    assert styles["R"].color.triplet.hex == ANSI_DARK["red"].lower()
    assert ansi_palette(True) is ANSI_DARK and ansi_palette(False) is ANSI_LIGHT


def test_render_skips_wide_char_stubs():
    emu, _ = make(10, 2)
    emu.feed("中文ab".encode())
    text = "".join(s.text for s in emu.render_view_line(0, cursor=False))
    assert text == "中文ab"


def test_hidden_cursor_is_not_drawn():
    emu, _ = make(10, 2)
    emu.feed(b"ab\x1b[?25l")
    assert not any(s.style and s.style.reverse for s in emu.render_view_line(0))


# -- the fast path ---------------------------------------------------------------------------


def _random_stream(rng: random.Random, n_lines: int) -> bytes:
    sgrs = ["0", "", "1;34", "01;32", "38;5;%d" % rng.randint(0, 255), "48;2;1;2;3", "7",
            "4;31;42", "22;39", "9", "38;5;2", "2"]
    out = []
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randint(0, 6)):
            r = rng.random()
            if r < 0.3:
                parts.append(f"\x1b[{rng.choice(sgrs)}m")
            elif r < 0.4:
                parts.append("\t")
            elif r < 0.45:
                parts.append("\r")
            else:
                n = rng.choice([0, 1, 5, 30, 79, 80, 81, 119, 120, 121, 200, 260])
                parts.append("".join(rng.choice("abcdefgh XYZ.-_") for _ in range(n)))
        out.append("".join(parts) + rng.choice(["\r\n"] * 8 + ["\n"]))
        if rng.random() < 0.03:
            out.append(rng.choice([
                "\x1b[?25l", "\x1b[H\x1b[2J", "\x1b[5;1H", "é ü 中文\r\n", "\x1b]0;title\x07",
                "\x1b[1;10r", "\x1b[r", "\x1b[?1049h", "\x1b[?1049l", "\x1b[3b", "\x1b[K",
                "\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l", "\x1bH", "\x1b[3g", "\x1b[2S",
                "\x1b7", "\x1b8",
            ]))
    return "".join(out).encode()


@pytest.mark.parametrize("seed", range(120))
def test_fast_path_equals_pyte_path(seed):
    rng = random.Random(seed)
    data = _random_stream(rng, rng.randint(50, 500))
    columns = rng.choice([10, 20, 40, 80, 120])
    lines = rng.choice([2, 3, 5, 10, 24, 40])
    scrollback = rng.choice([5, 5000])
    fast = TerminalEmulator(columns, lines, scrollback=scrollback)
    slow = TerminalEmulator(columns, lines, scrollback=scrollback, fast_path=False)
    i = 0
    while i < len(data):
        step = rng.choice([1, 7, 100, 4096, 65536])
        fast.feed(data[i:i + step])
        slow.feed(data[i:i + step])
        i += step
    assert fast.state() == slow.state()


@pytest.mark.parametrize("name", ["ls_color.bin", "ls_color_columns.bin", "flood.bin",
                                  "busybox_boot.bin", "top.bin"])
@pytest.mark.parametrize("size", [(120, 40), (80, 24), (33, 7)])
def test_fast_path_equals_pyte_path_on_the_corpus(name, size):
    data = (CORPUS / name).read_bytes() * 2
    fast = TerminalEmulator(*size)
    slow = TerminalEmulator(*size, fast_path=False)
    for i in range(0, len(data), 50_000):
        fast.feed(data[i:i + 50_000])
        slow.feed(data[i:i + 50_000])
    assert fast.state() == slow.state()
    assert fast.history_size > 0


def test_fast_path_is_used_for_a_flood():
    data = (CORPUS / "ls_color.bin").read_bytes()
    emu = TerminalEmulator(120, 40)
    calls = []
    original = emu._fast._lines
    emu._fast._lines = lambda block: (calls.append(block.count("\n") + 1), original(block))[1]
    emu.feed(data)
    assert sum(calls) > 0.9 * data.count(b"\n")
