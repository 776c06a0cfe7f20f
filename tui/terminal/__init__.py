"""Terminal emulation for console panes: the emulator (pure logic), key translation and an
asciicast recorder. The Textual widget is ``tui.widgets.terminal.TerminalView``."""

from tui.terminal.emulator import ANSI_DARK, ANSI_LIGHT, TerminalEmulator, ansi_palette
from tui.terminal.keys import SPECIAL_KEYS, key_to_bytes
from tui.terminal.record import AsciicastRecorder

__all__ = [
    "ANSI_DARK",
    "ANSI_LIGHT",
    "SPECIAL_KEYS",
    "AsciicastRecorder",
    "TerminalEmulator",
    "ansi_palette",
    "key_to_bytes",
]
