"""Key translation table and the asciicast recorder."""

from __future__ import annotations

import json

import pytest

from tui.terminal.keys import SPECIAL_KEYS, key_to_bytes, special_key_bytes
from tui.terminal.record import AsciicastRecorder

KEYS = [
    # (Textual key, character, app cursor mode, bytes)
    ("a", "a", False, b"a"),
    ("A", "A", False, b"A"),
    ("shift+a", "A", False, b"A"),
    ("space", " ", False, b" "),
    ("full_stop", ".", False, b"."),
    ("é", "é", False, "é".encode()),
    ("enter", "\r", False, b"\r"),
    ("tab", "\t", False, b"\t"),
    ("shift+tab", None, False, b"\x1b[Z"),
    ("backspace", "\x7f", False, b"\x7f"),
    ("escape", "\x1b", False, b"\x1b"),
    ("up", None, False, b"\x1b[A"),
    ("down", None, False, b"\x1b[B"),
    ("right", None, False, b"\x1b[C"),
    ("left", None, False, b"\x1b[D"),
    ("up", None, True, b"\x1bOA"),
    ("left", None, True, b"\x1bOD"),
    ("home", None, False, b"\x1b[H"),
    ("end", None, False, b"\x1b[F"),
    ("home", None, True, b"\x1bOH"),
    ("insert", None, False, b"\x1b[2~"),
    ("delete", None, False, b"\x1b[3~"),
    ("pageup", None, False, b"\x1b[5~"),
    ("pagedown", None, False, b"\x1b[6~"),
    ("f1", None, False, b"\x1bOP"),
    ("f4", None, False, b"\x1bOS"),
    ("f5", None, False, b"\x1b[15~"),
    ("f10", None, False, b"\x1b[21~"),
    ("f12", None, False, b"\x1b[24~"),
    ("ctrl+a", None, False, b"\x01"),
    ("ctrl+c", None, False, b"\x03"),
    ("ctrl+z", None, False, b"\x1a"),
    ("ctrl+@", None, False, b"\x00"),
    ("ctrl+space", None, False, b"\x00"),
    ("ctrl+left_square_bracket", None, False, b"\x1b"),
    ("ctrl+backslash", None, False, b"\x1c"),
    ("ctrl+right_square_bracket", None, False, b"\x1d"),
    ("ctrl+circumflex_accent", None, False, b"\x1e"),
    ("ctrl+underscore", None, False, b"\x1f"),
    ("alt+x", "x", False, b"\x1bx"),
    ("alt+shift+x", "X", False, b"\x1bX"),
    ("alt+backspace", None, False, b"\x1b\x7f"),
    ("ctrl+alt+a", None, False, b"\x1b\x01"),
    ("ctrl+up", None, False, b"\x1b[1;5A"),
    ("shift+up", None, False, b"\x1b[1;2A"),
    ("alt+left", None, False, b"\x1b[1;3D"),
    ("ctrl+shift+right", None, True, b"\x1b[1;6C"),
    ("ctrl+delete", None, False, b"\x1b[3;5~"),
    ("shift+f5", None, False, b"\x1b[15;2~"),
    ("ctrl+f1", None, False, b"\x1b[1;5P"),
    ("ctrl+end", None, False, b"\x1b[1;5F"),
]


@pytest.mark.parametrize("key,character,app,expected", KEYS, ids=[k[0] + ("/app" if k[2] else "")
                                                                    for k in KEYS])
def test_key_to_bytes(key, character, app, expected):
    assert key_to_bytes(key, character, app_cursor=app) == expected


def test_unknown_keys_send_nothing():
    assert key_to_bytes("f24", None) is None
    assert key_to_bytes("ignore", None) is None


def test_special_keys_are_byte_sequences_only():
    assert special_key_bytes("ctrl+c") == b"\x03"
    assert special_key_bytes("Esc") == b"\x1b"
    assert special_key_bytes("f12") == b"\x1b[24~"
    assert {f"f{n}" for n in range(1, 13)} <= set(SPECIAL_KEYS)
    with pytest.raises(KeyError):
        special_key_bytes("ctrl+alt+del")


def test_asciicast_roundtrip(tmp_path):
    clock = iter([100.0, 100.5, 101.0, 101.25, 102.0, 103.0])
    path = tmp_path / "rec" / "session.cast"
    rec = AsciicastRecorder(path, 120, 40, title="debian-1", clock=lambda: next(clock),
                            timestamp=1_700_000_000)
    payload = "héllo \x1b[31mwörld\x1b[0m 中文\r\n".encode()
    rec.output(payload[:2])   # "h" + the first byte of "é"
    rec.output(payload[2:9])
    rec.resize(100, 30)
    rec.output(payload[9:] + b"\xff")  # an invalid byte
    rec.close()
    rec.close()  # idempotent
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header, events = lines[0], lines[1:]
    assert header == {"version": 2, "width": 120, "height": 40, "timestamp": 1_700_000_000,
                      "title": "debian-1"}
    assert all(isinstance(e, list) and len(e) == 3 for e in events)
    times = [e[0] for e in events]
    assert times == sorted(times) and times[0] == 0.5
    assert [e for e in events if e[1] == "r"] == [[1.25, "r", "100x30"]]
    text = "".join(e[2] for e in events if e[1] == "o")
    assert text == payload.decode() + "\ufffd"
