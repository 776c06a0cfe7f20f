"""Control sequences checked against xterm's behaviour where tmux cannot be the reference
(it differs from xterm, or the property is not in a text capture: colours and attributes),
and the parser's state machine on split and interrupted input."""

from __future__ import annotations

import pytest
from rich.color import Color

from tui.terminal.emulator import ANSI_DARK, ANSI_LIGHT, TerminalEmulator


def make(columns=40, lines=10, **kw) -> tuple[TerminalEmulator, list[bytes]]:
    answers: list[bytes] = []
    return TerminalEmulator(columns, lines, respond=answers.append, **kw), answers


def row(emu: TerminalEmulator, y: int = 0) -> str:
    return emu.screen_text()[y]


def key_of(emu: TerminalEmulator, text: str, y: int = 0) -> tuple:
    return dict(emu.screen_runs()[y])[text]


# -- character sets ------------------------------------------------------------------------


def test_dec_graphics_in_g0_and_g1():
    emu, _ = make()
    emu.feed(b"\x1b(0lqk\x1b(B lqk \x1b)0\x0emqj\x0f mqj")
    assert row(emu) == "┌─┐ lqk └─┘ mqj"


def test_dec_graphics_maps_only_0x5f_to_0x7e():
    emu, _ = make(60)
    emu.feed(b"\x1b(0+,-.0AZ_`~\x1b(B")
    assert row(emu) == "+,-.0AZ ◆·"  # no arrows or block for + , - . 0 (tmux draws them)


def test_designation_a_is_latin1_in_gl():
    emu, _ = make()
    emu.feed(b"\x1b(A#a\x1b(B#a \x1b-A\x0e#a\x0f#a")
    assert row(emu) == "£á#a £á#a"


def test_single_shifts_take_one_character_from_g2_g3():
    emu, _ = make()
    emu.feed(b"\x1b*0\x1b+A\x1bNqq\x1bOaa")
    assert row(emu) == "─qáa"


def test_locking_shifts_and_decrc_restores_the_sets():
    emu, _ = make()
    emu.feed(b"\x1b*0\x1bnqq\x0fqq\x1b(0\x1b7\x1b(B\x1b8q\x1b(Bq")
    assert row(emu) == "──qq─q"


def test_reset_goes_back_to_ascii():
    emu, _ = make()
    emu.feed(b"\x1b(0\x1bcq")
    assert row(emu) == "q"


# -- cursor and editing --------------------------------------------------------------------


def test_nel_is_cr_and_lf_and_scrolls_at_the_bottom():
    emu, _ = make(20, 3)
    emu.feed(b"one\x1bEtwo\x1bEthree\x1bEfour")
    assert emu.screen_text() == ["two", "three", "four"]
    assert emu.history_text() == ["one"]


def test_hpa_hpr_vpr_cht_cbt():
    emu, _ = make(60)
    emu.feed(b"\x1b[10`a\x1b[5ab\x1b[2ec")
    assert row(emu) == " " * 9 + "a" + " " * 5 + "b"
    assert row(emu, 2) == " " * 16 + "c"
    emu.feed(b"\x1b[4;1H\x1b[2Ix\x1b[40G\x1b[2Zy\x1b[9Zz")
    assert row(emu, 3) == "z" + " " * 15 + "x" + " " * 7 + "y"


def test_origin_mode_clamps_to_the_region():
    emu, answers = make(20, 12)
    emu.feed(b"\x1b[4;8r\x1b[?6h\x1b[30;3H\x1b[6n")
    assert emu.cursor == (2, 7)
    assert answers == [b"\x1b[5;3R"]  # reported relative to the region's top
    emu.feed(b"\x1b[9d")
    assert emu.cursor == (2, 7)
    emu.feed(b"\x1b[H")
    assert emu.cursor == (0, 3)


def test_decstbm_in_origin_mode_homes_to_the_region():
    emu, _ = make(20, 12)
    emu.feed(b"\x1b[?6h\x1b[5;9r")
    assert emu.cursor == (0, 4)


def test_delete_characters_shifts_the_whole_line():
    emu, _ = make(10, 2)
    emu.feed(b"A\x1b[10GB\x1b[1;2H\x1b[8P")
    assert row(emu) == "AB"


def test_decaln_fills_with_e_and_homes():
    emu, _ = make(4, 2)
    emu.feed(b"\x1b[2;2r\x1b[2;2H\x1b#8")
    assert emu.screen_text() == ["EEEE", "EEEE"]
    assert emu.cursor == (0, 0)


# -- the parser ----------------------------------------------------------------------------


def test_strings_are_consumed():
    emu, answers = make(60)
    emu.feed(b"[\x1bP$qm\x1b\\][\x1b_apc\x1b\\][\x1b^pm\x1b\\][\x1bXsos\x1b\\]")
    assert row(emu) == "[][][][]"
    assert answers == []


def test_can_aborts_a_string_and_bel_does_not_end_a_dcs():
    emu, _ = make()
    emu.feed(b"[\x1bPabc\x18][\x1bPa\x07b\x1b\\]")
    assert row(emu) == "[][]"


def test_osc_title_with_bel_and_st():
    emu, _ = make()
    emu.feed(b"\x1b]0;first\x07")
    assert emu.title == "first"
    emu.feed(b"\x1b]2;second\x1b\\x")
    assert emu.title == "second"
    assert row(emu) == "x"


def test_esc_inside_csi_starts_a_new_sequence():
    emu, _ = make()
    emu.feed(b"ab\x1b[1\x1b[2Cc")
    assert row(emu) == "ab  c"


def test_controls_inside_csi_are_executed():
    emu, _ = make()
    emu.feed(b"abcdef\x1b[\r3Cx\r\n\x1b[1\x0bBy")
    assert emu.screen_text()[:4] == ["abcxef", "", "", "y"]  # VT, then CUD 1


def test_can_cancels_a_csi():
    emu, _ = make()
    emu.feed(b"12\x1b[5\x1834")
    assert row(emu) == "1234"


def test_private_marker_in_the_middle_ignores_the_sequence():
    emu, _ = make()
    emu.feed(b"a\x1b[1?2Cb")
    assert row(emu) == "ab"


STREAM = ("x\x1b[1;31mred\x1b[0m\x1b]0;t\x07\x1bP$qm\x1b\\\x1b(0q\x1b(B"
          "\x1b[38:2::1:2:3mc\x1b[m\u4e2d\u20dd\x1bE!").encode()


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_any_split_gives_the_same_screen(cut):
    whole, _ = make()
    whole.feed(STREAM)
    split, _ = make()
    split.feed(STREAM[:cut])
    split.feed(STREAM[cut:])
    assert split.state() == whole.state()
    assert split.title == whole.title == "t"


def test_secondary_and_primary_device_attributes():
    emu, answers = make()
    emu.feed(b"\x1b[>c\x1b[c\x1b[>0c")
    assert answers == [b"\x1b[>1;10;0c", b"\x1b[?62;22c", b"\x1b[>1;10;0c"]


# -- combining characters ------------------------------------------------------------------


def test_enclosing_marks_zwj_and_variation_selectors_join_the_cell():
    emu, _ = make()
    emu.feed("1\u20dd|\U0001F468\u200d\U0001F469|\u2764\ufe0f|".encode())
    cells = emu.line_cells(emu.history_size)
    assert cells[:9] == ["1\u20dd", "|", "\U0001F468\u200d", "", "\U0001F469", "", "|",
                         "\u2764\ufe0f", "|"]


# -- colours and attributes ----------------------------------------------------------------


def test_256_colour_index_16_is_black_not_the_theme_slot():
    emu, _ = make()
    emu.feed(b"\x1b[38;5;16ma\x1b[38;5;0mb\x1b[48;5;16mc\x1b[38;2;0;0;0md")
    assert key_of(emu, "a")[0] == "#000000"
    assert key_of(emu, "b")[0] == "black"
    assert emu.style_for(key_of(emu, "a")).color == Color.parse("#000000")
    assert emu.style_for(key_of(emu, "b")).color == Color.parse(ANSI_DARK["black"])
    assert emu.style_for(key_of(emu, "c")).bgcolor == Color.parse("#000000")
    assert key_of(emu, "d")[0] == "#000000"


@pytest.mark.parametrize(("sgr", "fg", "bg"), [
    (b"38:2::255:100:0", "#ff6400", "default"),
    (b"38:2:255:100:0", "#ff6400", "default"),      # without the colour-space id
    (b"38:2:0:255:100:0", "#ff6400", "default"),    # colour space 0
    (b"38:5:16", "#000000", "default"),
    (b"48:5:3", "default", "yellow"),
    (b"1;38:2::1:2:3;48:5:200", "#010203", "#ff00d7"),
    (b"38;5;196", "#ff0000", "default"),
    (b"38;5", "default", "default"),                # malformed: nothing changes
])
def test_extended_colours(sgr, fg, bg):
    emu, _ = make()
    emu.feed(b"\x1b[" + sgr + b"mX")
    key = key_of(emu, "X")
    assert (key[0], key[1]) == (fg, bg)


def test_dim_conceal_overline_are_rendered():
    emu, _ = make()
    emu.feed("\x1b[2ma\x1b[22;8;41mbb\x1b[28;53mc\x1b[55;7;8m\u4e2d\x1b[m!".encode())
    a, b, c = (emu.style_for(key_of(emu, t)) for t in ("a", "bb", "c"))
    assert a.dim and not a.bold
    assert b.conceal and b.bgcolor == Color.parse(ANSI_DARK["red"])
    assert c.overline and not c.conceal
    shown = [(s.text, s.style) for s in emu.render_view_line(0, cursor=False)]
    assert "".join(t for t, _ in shown) == "a  c  !"  # concealed: blanks of the same width
    assert shown[1] == ("  ", b)
    assert emu.screen_text()[0] == "abbc\u4e2d!"  # the text is still there (copy)


def test_default_text_stays_readable_on_light_and_dark_backgrounds():
    emu, _ = make()
    emu.feed(b"\x1b[47ma\x1b[107mb\x1b[41mc\x1b[40md")
    styles = {t: emu.style_for(key_of(emu, t)) for t in "abcd"}
    assert styles["a"].color == Color.parse(ANSI_DARK["black"])  # bg 7 on a dark theme
    assert styles["b"].color == Color.parse(ANSI_DARK["black"])
    assert styles["c"].color is None  # the theme's text reads fine on red
    assert styles["d"].color is None
    light, _ = make(palette=ANSI_LIGHT)
    light.feed(b"\x1b[40ma\x1b[47mb")
    assert light.style_for(key_of(light, "a")).color == Color.parse(ANSI_LIGHT["brightwhite"])
    assert light.style_for(key_of(light, "b")).color is None


def test_1049_saves_into_the_decsc_slot_of_the_main_screen():
    emu, answers = make(20, 10)
    emu.feed(b"\x1b[3;4H\x1b7\x1b[8;2H\x1b[?1049h\x1b[5;5H\x1b7\x1b[1;1H\x1b[?1049l\x1b8\x1b[6n")
    assert answers == [b"\x1b[8;2R"]  # not the alternate screen's own saved cursor


@pytest.mark.parametrize("name", ["ls_color.bin", "top.bin", "vim_inside.bin", "line_editing.bin",
                                  "dialog_checklist.bin"])
def test_row_rendering_fast_and_cell_paths_agree(name):
    from pathlib import Path

    data = (Path(__file__).resolve().parent / "corpus" / name).read_bytes()
    emu, _ = make(120, 40)
    emu.feed(data + b"\x1b[8mhidden\x1b[m")
    s = emu._screen
    for y in range(s.lines):
        line = s.buffer.get(y) or {}
        cells = [line.get(x, s.default_char) for x in range(s.columns)]
        for cx in (-1, 0, 5, 119):
            if not line and cx < 0:
                continue
            fast = emu._render_row(line, cx)
            slow = emu._render_cells(cells[:max(max(line) if line else 0, cx) + 1], cx)
            assert [(g.text, g.style) for g in fast] == [(g.text, g.style) for g in slow], (y, cx)
