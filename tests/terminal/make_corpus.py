#!/usr/bin/env python3
"""Regenerate tests/terminal/corpus/*.bin (committed; rerun only to change the corpus).

    .venv/bin/python tests/terminal/make_corpus.py [--real]

Synthetic streams are deterministic. With ``--real`` it also captures real programs through
``script(1)`` at 120x40 (coloured ls, top, vim), which depend on the machine; the committed
captures came from a Debian 12 container. ``--dialog`` captures dialog(1) boxes only (ncurses
line drawing, Debian package ``dialog``). Every file stays under 200 KB.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
LIMIT = 200_000
ESC = "\x1b"
CSI = "\x1b["


def write(name: str, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    assert len(raw) < LIMIT, (name, len(raw))
    (CORPUS / name).write_bytes(raw)
    print(f"{name}: {len(raw)} bytes")


def line_editing() -> str:
    out = ["$ ", "ecoh hi", "\b\b\b\b", "\x1b[K", "echo hi\r\n", "hi\r\n"]
    out.append("progress  10%\rprogress  55%\rprogress 100%\r\n")
    out.append("abcdefghij\x1b[5D\x1b[2P\r\n")  # delete 2 chars at col 5
    out.append("abcdefghij\x1b[5D\x1b[3@XYZ\r\n")  # insert 3 blanks then text
    out.append("0123456789\x1b[4D\x1b[2X\r\n")  # erase 2 chars
    out.append("left part\x1b[1K\r\n")  # erase to start of line
    out.append("whole\x1b[2K gone\r\n")
    out.append("$ vi\b\b\x1b[Ksh -c 'exit 3'\r\n")
    out.append("tab\there\tand\tthere\r\n")
    out.append("\x1b[3;20Hcursor moved\x1b[10;1H")
    out.append("\x1b[1mbold\x1b[0m \x1b[4munder\x1b[24m \x1b[7mrev\x1b[27m done\r\n")
    out.append("a long line that wraps " * 8 + "\r\n")
    out.append("\x1b[A\x1b[A\x1b[30Cup-two\r\n\r\n")
    out.append("\x1b[2Anext-line-via-CNL\x1b[2E!\r\n")
    out.append("$ ")
    return "".join(out)


def scroll_regions() -> str:
    out = [CSI + "2J" + CSI + "H"]
    out.append("header line (fixed)\r\n")
    for i in range(38):
        out.append(f"row {i:02d}\r\n")
    out.append("status line (fixed)")
    out.append(CSI + "2;39r")  # region rows 2..39
    out.append(CSI + "39;1H")
    for i in range(25):
        out.append(f"\r\nscrolled {i:02d} inside the region")
    out.append(CSI + "2;1H" + ESC + "M" + ESC + "M" + "inserted by RI")
    out.append(CSI + "10;1H" + CSI + "3L" + "after IL 3")
    out.append(CSI + "20;1H" + CSI + "2M" + "after DL 2")
    out.append(CSI + "5S" + CSI + "2T")  # SU 5, SD 2 inside the region
    out.append(CSI + "r" + CSI + "40;1H" + "\r\nafter reset: full-screen scroll\r\n$ ")
    return "".join(out)


def tabs() -> str:
    out = ["col0\tcol8\tcol16\tcol24\tcol32\r\n"]
    out.append("\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\tend\r\n")  # tab past the last stop
    out.append(CSI + "3g")  # clear all tab stops
    out.append(CSI + "1;5H" + ESC + "H" + CSI + "1;15H" + ESC + "H" + CSI + "1;40H" + ESC + "H")
    out.append(CSI + "5;1H" + "a\tb\tc\td\r\n")
    out.append(CSI + "1;15H" + CSI + "g")  # clear one stop
    out.append(CSI + "6;1H" + "a\tb\tc\r\n")
    for i in range(20):
        out.append("\t".join(f"f{i}{j}" for j in range(i % 7 + 2)) + "\r\n")
    return "".join(out)


def wide_chars() -> str:
    out = ["中文字符测试: 你好，世界！\r\n", "日本語のテキスト、カタカナ、ひらがな\r\n"]
    out.append("한국어 텍스트 (Hangul)\r\n")
    out.append("mixed 中a文b字c符d\r\n")
    out.append("x" * 119 + "宽" + "after wide wrap\r\n")  # a wide char at the last column
    out.append("宽" * 70 + "\r\n")  # wraps at 60 wide chars
    out.append("abc中文def\x1b[5D\x1b[1mZ\x1b[0m\r\n")
    out.append("full-width ＡＢＣ１２３\r\n")
    return "".join(out)


def utf8() -> str:
    out = ["Grüße aus Köln — “quotes” ‘single’ … ½ € ©\r\n"]
    out.append("box: ┌──────┐\r\n     │ text │\r\n     └──────┘\r\n")
    out.append("blocks: ▁▂▃▄▅▆▇█ ░▒▓ braille: ⠁⠂⠄⡀\r\n")
    out.append("greek: αβγδε ΑΒΓΔΕ cyrillic: привет мир\r\n")
    out.append("combining: cafe\u0301 nai\u0308ve\r\n")
    out.append("arrows: ← ↑ → ↓ ↔ ⇒ math: ∀∃∅∈∉∑∏√∞≤≥≠\r\n")
    out.append(CSI + "38;5;196mred256" + CSI + "0m " + CSI + "38;2;10;200;30mtruecolor"
               + CSI + "0m\r\n")
    return "".join(out)


def busybox_boot() -> str:
    rng = random.Random(7)
    out = []
    t = 0.0
    msgs = [
        "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)",
        "Command line: BOOT_IMAGE=/vmlinuz console=ttyS0,115200n8",
        "x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'",
        "BIOS-provided physical RAM map:",
        "ACPI: RSDP 0x00000000000F5A40 000014 (v00 BOCHS )",
        "Memory: 1012876K/1048056K available (14336K kernel code)",
        "Serial: 8250/16550 driver, 4 ports, IRQ sharing enabled",
        "serial8250: ttyS0 at I/O 0x3f8 (irq = 4, base_baud = 115200) is a 16550A",
        "virtio_blk virtio1: [vda] 4194304 512-byte logical blocks (2.15 GB/2.00 GiB)",
        "EXT4-fs (vda1): mounted filesystem with ordered data mode.",
        "Freeing unused kernel image (initmem) memory: 2756K",
        "Run /sbin/init as init process",
    ]
    for _ in range(6):
        for m in msgs:
            t += rng.random() * 0.3
            out.append(f"[{t:12.6f}] {m}\r\n")
    for svc in ["syslogd", "klogd", "networking", "crond", "sshd", "udhcpc"]:
        out.append(f"Starting {svc}... " + CSI + "1;32m" + "OK" + CSI + "0m\r\n")
    out.append("udhcpc: sending discover\r\nudhcpc: lease of 10.0.3.15 obtained\r\n")
    out.append("\r\nPlease press Enter to activate this console. ")
    out.append("\r\n\r\nBusyBox v1.36.1 built-in shell (ash)\r\n\r\n")
    out.append("~ # " + CSI + "6n")  # ash asks for the cursor position at each prompt
    out.append("ls /\r\nbin   dev   etc   home  lib   proc  root  sbin  sys   tmp   usr   var\r\n")
    out.append("~ # " + CSI + "6n")
    out.append("uname -a\r\nLinux busybox 6.1.0-18-amd64 #1 SMP x86_64 GNU/Linux\r\n~ # "
               + CSI + "6n")
    return "".join(out)


def flood() -> str:
    rng = random.Random(11)
    colours = ["0", "1;31", "32", "01;34", "38;5;208", "48;2;30;30;60", "4;36", "7"]
    out = []
    size = 0
    i = 0
    while size < 150_000:
        n = rng.randint(0, 260)  # some lines wrap once or twice at 120 columns
        body = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 -_./") for _ in range(n))
        if rng.random() < 0.5:
            cut = rng.randint(0, len(body))
            body = body[:cut] + CSI + rng.choice(colours) + "m" + body[cut:] + CSI + "0m"
        if rng.random() < 0.1:
            body = body.replace(" ", "\t", 2)
        line = f"{i:06d} {body}\r\n"
        out.append(line)
        size += len(line)
        i += 1
    out.append("$ ")
    return "".join(out)


def alt_screen_synthetic() -> str:
    out = ["$ some output on the main screen\r\n$ htop\r\n"]
    out.append(CSI + "?1049h" + CSI + "H" + CSI + "2J")
    out.append(CSI + "1;1H" + CSI + "7m" + " full-screen app".ljust(120) + CSI + "0m")
    for y in range(2, 40):
        out.append(f"{CSI}{y};1H line {y:02d} of the app")
    out.append(CSI + "?1049l")
    out.append("$ back on the main screen\r\n$ ")
    return "".join(out)


def colon_sgr() -> str:
    return (
        "plain " + CSI + "38:2::255:100:0m" + "orange" + CSI + "0m "
        + CSI + "38:5:33m" + "blue256" + CSI + "0m "
        + CSI + "4:3m" + "curly" + CSI + "4:0m" + " no-underline "
        + CSI + "1;38:2::1:2:3;48:5:200m" + "mixed" + CSI + "m end\r\n"
    )


# The streams below cover what pyte got wrong. What tmux itself gets wrong (the UK set, HPR,
# VPR, CHT, CAN inside a DCS string, SS2/SS3, 96-character sets) and colours (not in a text
# capture) are checked against xterm's behaviour in test_sequences.py instead.


def dec_graphics() -> str:
    """Boxes as ncurses and dialog draw them: G0 and G1 designations, SI/SO."""
    out = [ESC + "(0" + "lqqqqqqwqqqqqqk\r\nx tl   x  tr  x\r\ntqqqqqqnqqqqqqu\r\n"
           + "mqqqqqqvqqqqqqj" + ESC + "(B plain again\r\n"]
    out.append(ESC + ")0" + "G1 box: \x0elqk\x0f text \x0ex\x0f \x0emqj\x0f done\r\n")
    out.append("all of 0x5f-0x7e: " + ESC + "(0" + "".join(map(chr, range(0x60, 0x7f)))
               + ESC + "(B\r\n")
    out.append(ESC + "(0" + "ascii stays: ABC 123 !?" + ESC + "(B\r\n")
    out.append(CSI + "10;20H" + ESC + "(0" + "lqqk" + CSI + "11;20H" + "x" + CSI + "11;23H" + "x"
               + CSI + "12;20H" + "mqqj" + ESC + "(B" + CSI + "14;1H")
    out.append(ESC + "7" + ESC + "(0" + ESC + "8" + "restored G0 by DECRC: qqq\r\n")
    out.append("\x0e" + "SO without G1 designated: qqq" + "\x0f\r\n$ ")
    return "".join(out)


def nel() -> str:
    out = ["first" + ESC + "Esecond" + ESC + "E" + ESC + "Ethird (after two NEL)\r\n"]
    out.append(CSI + "20;40H" + "middle" + ESC + "E" + "next row, column 1")
    out.append(CSI + "5;10r" + CSI + "10;30H" + "bottom of region" + ESC + "E" + "scrolled")
    out.append(CSI + "r" + CSI + "40;1H" + "last" + ESC + "E" + "scrolls the screen\r\n$ ")
    return "".join(out)


def strings() -> str:
    out = ["DCS:[" + ESC + "P$qm" + ESC + "\\]\r\n"]
    out.append("DCS sixel:[" + ESC + "Pq#0;2;0;0;0#1!10~-" + ESC + "\\]\r\n")
    out.append("APC:[" + ESC + "_Gf=100,a=T;AAAA" + ESC + "\\]\r\n")
    out.append("PM:[" + ESC + "^private message" + ESC + "\\]\r\n")
    out.append("SOS:[" + ESC + "Xstart of string" + ESC + "\\]\r\n")
    out.append("OSC BEL:[" + ESC + "]0;a title\x07]\r\n")
    out.append("OSC ST:[" + ESC + "]2;another" + ESC + "\\]\r\n")
    out.append("OSC 8 link:[" + ESC + "]8;;http://example.com" + ESC + "\\link"
               + ESC + "]8;;" + ESC + "\\]\r\n")
    out.append("DCS with newline inside:[" + ESC + "P1$r0m\r\nstill inside" + ESC + "\\]\r\n")
    out.append("$ ")
    return "".join(out)


def esc_in_csi() -> str:
    out = ["ab" + CSI + "1" + CSI + "2C" + "c\r\n"]  # the first CSI is abandoned
    out.append("x" + CSI + "3" + ESC + "7y" + ESC + "8z\r\n")  # ESC 7 inside CSI: DECSC
    out.append("cr in csi: abcdef" + CSI + "\r3Cq\r\n")  # CR executed, then CUF 3
    out.append("bs in csi: abcdef" + CSI + "2\bDq\r\n")
    out.append("can: 12" + CSI + "5\x18" + "34\r\n")
    out.append("vt in csi:" + CSI + "1\x0bB" + "down\r\n")
    out.append("private in middle: " + CSI + "1?2Cgone\r\n")
    out.append("leading zeros: " + CSI + "00000000003C|\r\n$ ")
    return "".join(out)


def hpa_cbt() -> str:
    out = ["HPA:" + CSI + "20`" + "at 20" + CSI + "`" + "@" + "\r\n"]
    out.append("CHA:" + CSI + "30G" + "30\r\n")
    out.append("CBT:" + CSI + "50G" + CSI + "Z" + "1" + CSI + "2Z" + "2" + CSI + "9Z" + "9\r\n")
    out.append("VPA:" + CSI + "10d" + "row 10\r\n")
    out.append(CSI + "20;1H" + "HPA past the end:" + CSI + "500`" + "E\r\n$ ")
    return "".join(out)


def origin_mode() -> str:
    out = [CSI + "2J" + CSI + "H" + "top line\r\n"]
    out.append(CSI + "5;15r" + CSI + "?6h")
    out.append(CSI + "1;1H" + "region row 1 (screen 5)")
    out.append(CSI + "30;5H" + "clamped to the region bottom")
    out.append(CSI + "99;1H" + CSI + "A" + "one up from the bottom")
    out.append(CSI + "3d" + "VPA 3 in region")
    out.append(CSI + "H" + CSI + "5B" + "down 5")
    out.append(ESC + "7" + CSI + "?6l" + CSI + "1;1H" + "screen home" + ESC + "8" + "DECRC")
    out.append(CSI + "?6l" + CSI + "r" + CSI + "30;1H" + "after reset: row 30\r\n$ ")
    return "".join(out)


def combining() -> str:
    out = ["enclosing: 1\u20dd 2\u20de a\u20e3|\r\n"]
    out.append("acute: e\u0301 double: a\u0308\u0301 cedilla: c\u0327|\r\n")
    out.append("zwj: \U0001F468\u200d\U0001F469\u200d\U0001F467|\r\n")
    out.append("vs16: \u2764\ufe0f \u263a\ufe0f vs15: \u2764\ufe0e|\r\n")
    out.append("zwsp: a\u200bb|\r\n")
    out.append("wide+mark: \u4e2d\u0301x|\r\n")
    out.append("at the edge: " + "." * 106 + "e\u0301|\r\n$ ")
    return "".join(out)


def real(name: str, command: str, stdin: bytes | None = None, timeout: float = 20) -> bytes:
    """Run a command under script(1) in a 120x40 pty and return what it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "out"
        full = f"stty cols 120 rows 40; export TERM=xterm-256color; {command}"
        subprocess.run(
            ["script", "-q", "-e", "-c", full, str(log)],
            input=stdin, timeout=timeout, check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        data = log.read_bytes()
    # script(1) writes a "Script started" header line unless -q; strip any we still get.
    if data.startswith(b"Script started"):
        data = data.split(b"\n", 1)[1]
    return data


def inside(capture: bytes) -> bytes:
    """A full-screen program's output cut just before it leaves the alternate screen."""
    leave = capture.rfind(b"\x1b[?1049l")
    return capture[:leave] if leave > 0 else capture


def dialogs() -> None:
    # LANG=C: ncurses draws its boxes with the DEC line-drawing set (ESC ( 0 ... ESC ( B).
    checklist = ("LANG=C dialog --timeout 1 --backtitle 'corral corpus' --title 'Install' "
                 "--checklist 'Pick the parts to install:' 15 60 5 base 'Base system' on "
                 "ssh 'SSH server' off web 'Web server' off desktop 'Desktop' off")
    write("dialog_checklist.bin", inside(real("dialog", checklist, timeout=30)))
    # UTF-8 locale, but ncurses told to keep using the ACS escapes (as on many consoles).
    gauge = ("NCURSES_NO_UTF8_ACS=1 LANG=C.UTF-8 dialog --timeout 1 --title 'Copying' "
             "--yesno 'Continue with the installation?' 8 50")
    write("dialog_yesno_acs.bin", inside(real("dialog", gauge, timeout=30)))


def main() -> None:
    CORPUS.mkdir(exist_ok=True)
    write("line_editing.bin", line_editing())
    write("scroll_regions.bin", scroll_regions())
    write("tabs.bin", tabs())
    write("wide_chars.bin", wide_chars())
    write("utf8.bin", utf8())
    write("busybox_boot.bin", busybox_boot())
    write("flood.bin", flood())
    write("alt_screen.bin", alt_screen_synthetic())
    write("colon_sgr.bin", colon_sgr())
    write("dec_graphics.bin", dec_graphics())
    write("nel.bin", nel())
    write("strings.bin", strings())
    write("esc_in_csi.bin", esc_in_csi())
    write("hpa_cbt.bin", hpa_cbt())
    write("origin_mode.bin", origin_mode())
    write("combining.bin", combining())
    from xterm_cases import CASES, stream  # the cases where xterm's behaviour is documented

    for name in CASES:
        write(f"{name}.bin", stream(name))
    if "--dialog" in sys.argv or "--real" in sys.argv:
        dialogs()
    if "--real" in sys.argv:
        ls = real("ls", "ls --color=always -l /usr/lib/x86_64-linux-gnu /usr/share | head -c 150000")
        write("ls_color.bin", ls)
        write("ls_color_columns.bin",
              real("ls", "ls --color=always -C /usr/lib/x86_64-linux-gnu | head -c 60000"))
        write("top.bin", real("top", "top -n 1 -d 0.2"))
        vim_keys = b"5G"  # move, then quit
        vim = real("vim", "sleep 0.3; vim -u NONE -N -c 'syntax on' /etc/services",
                   stdin=b"\x1b" + vim_keys + b":q!\r", timeout=30)
        # Cut just before vim leaves the alternate screen: what a user sees inside vim.
        write("vim_inside.bin", inside(vim))
        write("vim_exit.bin", vim)


if __name__ == "__main__":
    main()
