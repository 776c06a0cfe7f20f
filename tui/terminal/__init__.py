"""Terminal emulation for console panes: the emulator (pure logic, ``emulator``), key
translation (``keys``) and an asciicast recorder (``record``). The Textual widget is
``tui.widgets.terminal.TerminalView``.

Nothing is imported here: the emulator (and pyte) load when the first console opens, not
at start-up.
"""
