"""Parsers of the lxc-* tools' output, on text captured from LXC 5.0.2."""

from datetime import datetime

from backends.lxc import parse
from backends.models import InstanceStatus

FANCY = """\
NAME  STATE   PID  AUTOSTART IPV4                  IPV6
b1    RUNNING 9178 0         -                     -
web-2 RUNNING 9300 1         10.0.3.5, 10.0.3.6    fd42::5
old   STOPPED -    0         -                     -
"""


def test_fancy_table_cuts_columns_at_header_offsets():
    rows = parse.fancy_table(FANCY)
    assert [r["NAME"] for r in rows] == ["b1", "web-2", "old"]
    assert parse.addresses(rows[1]["IPV4"]) == ("10.0.3.5", "10.0.3.6")
    assert parse.addresses(rows[0]["IPV4"]) == ()
    assert parse.status_of(rows[2]["STATE"]) is InstanceStatus.STOPPED


def test_info_and_monitor_lines():
    info = parse.info("Name:           b1\nState:          RUNNING\nPID:            9178\n"
                      "IP:             10.0.3.5\nIP:             fd42::5\nCPU use:        9682055\n"
                      "Memory use:     937984\n")
    assert info["State"] == "RUNNING" and info["CPU use"] == "9682055"
    assert parse.addresses(info["IP"]) == ("10.0.3.5", "fd42::5")
    assert parse.monitor_line("'b1' changed state to [FROZEN]\n") == ("b1", "FROZEN")
    assert parse.monitor_line("'b1' exited with status [0]") is None


def test_snapshot_listing_with_comments():
    text = ("snap0 (/tmp/lxct/b1/snaps) 2026:11:29 17:15:51\n"
            "snap1 (/tmp/lxct/b1/snaps) 2026:11:29 17:15:52\nhello\nworld\n")
    assert list(parse.snapshots(text)) == [
        ("snap0", datetime(2026, 11, 29, 17, 15, 51), ""),
        ("snap1", datetime(2026, 11, 29, 17, 15, 52), "hello\nworld"),
    ]
    assert list(parse.snapshots("No snapshots\n")) == []


def test_names_and_config_values():
    assert parse.NAME_RE.match("web-1.test_2")
    assert not parse.NAME_RE.match("-lead") and not parse.NAME_RE.match("sp ace")
    cfg = ("# Template used to create this container: /usr/share/lxc/templates/lxc-busybox\n"
           "lxc.start.auto = 0\nlxc.start.auto = 1\n")
    assert parse.config_value(cfg, "lxc.start.auto") == "1"
    assert parse.template_of(cfg) == "busybox"
