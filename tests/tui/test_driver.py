"""corral's terminal driver (tui/driver.py): its input thread sleeps while nothing happens,
and keys still arrive — a lone Esc too, which the key parser sends only after its time-out.
The real program in a real tmux session (a private tmux server)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tui._textual_compat import XTermParser, parser_deadline

from .test_hangup import corral_pid, script  # noqa: F401 - the fixture, shared


def test_parser_deadline_waits_for_ever_unless_a_sequence_is_unfinished():
    parser = XTermParser()
    assert parser_deadline(parser) is None
    list(parser.feed("\x1b"))  # a lone Esc: the parser waits a moment for more
    wait = parser_deadline(parser)
    assert wait is not None and 0 <= wait <= 1.0
    time.sleep(wait + 0.01)
    keys = [getattr(e, "key", None) for e in parser.tick()]
    assert keys == ["escape"]
    assert parser_deadline(parser) is None


def switches(pid: int) -> int:
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue  # a thread that just ended
        total += sum(int(line.split()[1]) for line in lines
                     if line.startswith("voluntary_ctxt_switches:"))
    return total


def test_at_rest_corral_barely_wakes_up_and_esc_still_arrives(script):  # noqa: F811
    session = "corral-driver"
    tmux = ["tmux", "-L", f"{session}-{time.monotonic_ns()}"]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                    str(script)], check=True)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", session],
                              capture_output=True, text=True).stdout

    def wait_for(predicate, what: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(screen()):
            assert time.monotonic() < deadline, f"{what}: {screen()!r}"
            time.sleep(0.1)

    try:
        pane = int(subprocess.run([*tmux, "display", "-p", "-t", session, "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout)
        pid = corral_pid(pane)
        wait_for(lambda s: "Instances" in s, "corral did not draw its screen")
        time.sleep(3)  # start-up work done
        before = switches(pid)
        time.sleep(3)
        woke = switches(pid) - before
        # Textual's own driver alone wakes up 30 times in 3 s (select every 0.1 s);
        # corral's own (tui/driver.py) sleeps until a key comes, and the hang-up watch
        # (tui/hangup.py) until the terminal goes.
        assert woke < 20, f"corral woke up {woke} times in 3 s with nothing to do"

        subprocess.run([*tmux, "send-keys", "-t", session, "/"], check=True)
        time.sleep(0.5)
        subprocess.run([*tmux, "send-keys", "-t", session, "-l", "zzqx"], check=True)
        wait_for(lambda s: "zzqx" in s, "the filter did not get the typed text")
        subprocess.run([*tmux, "send-keys", "-t", session, "Escape"], check=True)
        wait_for(lambda s: "zzqx" not in s, "Esc did not clear the filter")
        subprocess.run([*tmux, "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists():
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":
                break
            assert time.monotonic() < deadline, "corral did not quit on q"
            time.sleep(0.1)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)



def test_esc_then_punctuation_in_one_read_is_one_alt_key_and_sequences_stay_whole():
    """Textual's parser names Esc ``:`` as ``colon`` alone (the Esc lost); the input
    thread makes it ``alt+colon`` with its character, which the app takes apart. Sequences
    the terminal sends (CSI, OSC ended by ST), letters after Esc (the parser's own
    ``alt+x``) and a bracketed paste's text are left whole."""
    from tui._textual_compat import key_name
    from tui.driver import AltKeys

    def cut(data, alt=None):
        alt = alt or AltKeys(key_name)
        return [p if isinstance(p, str) else (p.key, p.character) for p in alt.pieces(data)]

    assert cut("\x1b:pr\r") == [("alt+colon", ":"), "pr\r"]
    assert cut("\x1b/web") == [("alt+slash", "/"), "web"]
    assert cut("\x1b ") == [("alt+space", " ")]
    assert cut("\x1b?") == [("alt+question_mark", "?")]
    assert cut("x\x1b\x1b:") == ["x", ("escape", "\x1b"), ("alt+colon", ":")]
    assert cut("\x1b[A\x1b:") == ["\x1b[A", ("alt+colon", ":")]
    assert cut("\x1bN\x1bj") == ["\x1bN\x1bj"]
    for whole in ("\x1b]11;rgb:0/0/0\x1b\\", "\x1b_Gi=1;OK\x1b\\", "\x1b[<0;3;4M", "\x1b"):
        assert cut(whole) == [whole]
    alt = AltKeys(key_name)  # a paste over two reads: its Esc : is text
    assert cut("\x1b[200~a\x1b:b", alt) == ["\x1b[200~a\x1b:b"]
    assert cut("c\x1b[201~\x1b:", alt) == ["c\x1b[201~", ("alt+colon", ":")]
    parser = XTermParser()  # and the parser agrees that the rest is what it was
    assert [e.key for e in parser.feed("pr\r")] == ["p", "r", "enter"]
