"""The graphical console's pure parts: fitting a screen into a pane, mapping cells back
to guest pixels, half-block rows, keys as keysyms, the console server's frame format, and
the ``[console]`` settings."""

from __future__ import annotations

from PIL import Image
from rich.style import Style

from backends.console.display import BAND_BYTES, parse_frame, rgb_bands
from backends.vnc import KEYSYMS, Rect
from tui.config import load_config
from tui.graphics import Fit, HalfBlocks, choose_mode, key_events

SHIFT, CTRL, ALT = KEYSYMS["shift"], KEYSYMS["ctrl"], KEYSYMS["alt"]


def test_fit_keeps_the_aspect_ratio_and_centres():
    wide = Fit(1024, 768, 160, 45)  # 4:3 in 160x90 half-block pixels: height-bound
    assert wide.size == (120, 90) and wide.cells == (120, 45) and wide.offset == (20, 0)
    tall = Fit(1280, 800, 100, 45)  # 16:10 in 100x90: width-bound
    assert tall.size == (100, 62) and tall.cells == (100, 31) and tall.offset == (0, 7)


def test_cells_map_back_to_guest_pixels():
    fit = Fit(1024, 768, 160, 45)
    assert fit.to_guest(19, 10) is None and fit.to_guest(140, 10) is None  # the bars
    assert fit.to_guest(20, 0) == (4, 8)  # middle of the first image cell
    x, y = fit.to_guest(139, 44)
    assert 1015 <= x <= 1023 and 759 <= y <= 767
    assert fit.to_guest(80, 22)[0] == 516  # cell 80 covers pixels 512..520
    assert fit.to_guest(0, -3, clamp=True) == (4, 8)  # a drag past the corner: the edge


def test_dirty_rows_cover_the_changed_region():
    fit = Fit(1024, 768, 160, 45)
    rows = fit.rows_of(0, 17)  # guest rows 0..16 -> half-block pixel rows 0..2
    assert 0 in rows and 1 in rows and max(rows) <= 3
    assert fit.rows_of(700, 68).stop == 45


def test_half_blocks_put_the_upper_pixel_in_front_and_merge_runs():
    image = Image.new("RGB", (4, 4), (255, 0, 0))
    for x in range(4):
        image.putpixel((x, 1), (0, 0, 255))
    image.putpixel((3, 0), (0, 255, 0))
    blocks = HalfBlocks()
    fit = Fit(4, 4, 6, 2)  # 4x4 pixels in 6x4 half-block pixels: 4 wide, centred
    blocks.scale(image, fit)
    blank = Style()
    row = blocks.row(0, blank)
    assert [s.text for s in row] == [" ", "▀▀▀", "▀", " "]
    assert row[1].style.color.triplet == (255, 0, 0)
    assert row[1].style.bgcolor.triplet == (0, 0, 255)
    assert row[2].style.color.triplet == (0, 255, 0)
    assert [s.style.color.triplet for s in blocks.row(1, blank)[1:2]] == [(255, 0, 0)]


def test_keys_become_keysyms_with_modifiers():
    a = ord("a")
    assert key_events("a", "a") == [(a, True), (a, False)]
    assert key_events("A", "A") == [(SHIFT, True), (ord("A"), True), (ord("A"), False),
                                    (SHIFT, False)]
    assert key_events("ctrl+c", "\x03") == [(CTRL, True), (ord("c"), True),
                                            (ord("c"), False), (CTRL, False)]
    assert key_events("ctrl+alt+delete", None)[:3] == [(CTRL, True), (ALT, True),
                                                       (KEYSYMS["delete"], True)]
    f5 = KEYSYMS["f5"]
    assert key_events("shift+f5", None) == [(SHIFT, True), (f5, True), (f5, False),
                                            (SHIFT, False)]
    assert key_events("question_mark", "?")[0] == (SHIFT, True)
    assert key_events("enter", "\r") == [(KEYSYMS["enter"], True), (KEYSYMS["enter"], False)]
    assert key_events("é", "é") == [(0xE9, True), (0xE9, False)]
    assert key_events("hyper+x", None) == []


def test_frames_round_trip_and_big_rectangles_are_cut_into_bands():
    width, height = 1024, 768
    bgrx = bytearray(width * height * 4)
    bgrx[0:4] = bytes([1, 2, 3, 0])  # B G R X of pixel (0, 0)
    messages = rgb_bands(bgrx, width, height, Rect(0, 0, width, height))
    assert len(messages) == 3 and all(len(m) <= BAND_BYTES + 13 for m in messages)
    w, h, x, y, rw, _, data = parse_frame(messages[0])
    assert (w, h, x, y, rw) == (1024, 768, 0, 0, 1024) and bytes(data[:3]) == b"\x03\x02\x01"
    assert sum(parse_frame(m)[5] for m in messages) == 768
    small = rgb_bands(bgrx, width, height, Rect(0, 0, 2, 2))[0]
    assert parse_frame(small)[4:6] == (2, 2)
    assert parse_frame(b"F" + small[1:-1]) is None  # short pixels: ignored, not misread


def test_console_settings(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[console]\ngraphics = "sixel"\nscreen_fps = 25\n'
                   'screenshot_dir = "/tmp/shots"\n')
    c = load_config(cfg)
    assert (c.graphics, c.screen_fps, c.screenshot_dir) == ("sixel", 25.0, "/tmp/shots")
    cfg.write_text('[console]\ngraphics = "ascii"\nscreen_fps = 500\n')
    c = load_config(cfg)
    assert c.graphics == "auto" and c.screen_fps == 10.0 and len(c.problems) == 2  # the default
    assert choose_mode("kitty") == "kitty" and choose_mode("halfblock") == "halfblock"
