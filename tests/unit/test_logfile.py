"""The log file: where it is, rotated, 0600, warnings and errors only, secrets blanked."""

from __future__ import annotations

import logging
import os
import stat

from tui import logfile

TOKEN = ("eyJjbGllbnRfbmFtZSI6InZpYXVpIiwiZmluZ2VycHJpbnQiOiJhYmMiLCJzZWNyZXQiOiJ4eXoifQ==")
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----"


def test_log_file_rotates_and_never_holds_a_secret(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    root = logging.getLogger()
    before = list(root.handlers)
    path = logfile.setup(env)
    try:
        assert path == tmp_path / "state" / "corral" / "corral.log"
        log = logging.getLogger("corral.test")
        log.info("not written: below warning")
        log.warning("adding remote lab failed: token %s refused", TOKEN)
        log.error("push failed with password=hunter2 and key %s", KEY)
        log.warning('POST body {"trust_token": "abc123", "secret": "s3"}')
        for handler in root.handlers:
            handler.flush()
        text = path.read_text()
        assert "adding remote lab failed" in text and "push failed" in text
        assert "not written" not in text
        for secret in (TOKEN, "hunter2", "MHcCAQEEIB", "abc123", '"s3"'):
            assert secret not in text, secret
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        for _ in range(3000):
            log.warning("x" * 500)
        assert (path.parent / "corral.log.1").exists()
        assert os.path.getsize(path) <= logfile.MAX_BYTES
    finally:
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)
                handler.close()


def _with_log(env, body):
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        path = logfile.setup(env)
        body(path)
    finally:
        logfile.problem = None  # (other tests' apps must not show it)
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)
                handler.close()


def test_a_message_cannot_forge_a_line(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    forged = "2026-01-01 00:00:00,000 ERROR corral: forged"

    def body(path):
        log = logging.getLogger("corral.test")
        log.warning("file name %s", f"a\n{forged}\r\x1b]52;c;eA==\x07\u2028b")
        try:
            raise ValueError(f"bad\n{forged}")
        except ValueError:
            log.exception("listing failed for %s", "x\ny")
        for handler in logging.getLogger().handlers:
            handler.flush()
        lines = path.read_text().splitlines()
        records = [line for line in lines if not line.startswith("  ")]
        assert len(records) == 2, lines
        assert records[0].endswith("file name a\\n" + forged + "\\r\\x1b]52;c;eA==\\x07"
                                   "\\u2028b")
        assert records[1].endswith("listing failed for x\\ny")
        assert "  ValueError: bad" in lines and f"  {forged}" in lines
        assert not any(line.startswith(forged) for line in lines)

    _with_log(env, body)


def test_a_planted_log_link_is_not_followed_nor_its_target_chmodded(tmp_path):
    state = tmp_path / "state" / "corral"
    state.mkdir(parents=True)
    target = tmp_path / "shadow"
    target.write_text("root:x:0:0\n")
    target.chmod(0o644)
    (state / "corral.log").symlink_to(target)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}

    def body(path):
        assert path is None
        assert "No log is written" in logfile.problem
        assert f"{state / 'corral.log'} is a symbolic link" in logfile.problem
        logging.getLogger("corral.test").error("not written anywhere")

    _with_log(env, body)
    assert target.read_text() == "root:x:0:0\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    state.chmod(0o777)  # a log directory others can write: no log either
    (state / "corral.log").unlink()

    def refused(path):
        assert path is None
        assert f"The directory {state} can be changed by other users (mode 0777)" in \
            logfile.problem

    _with_log(env, refused)
    assert not (state / "corral.log").exists()


def test_a_name_that_is_not_utf8_or_reorders_the_line_is_logged_escaped(tmp_path):
    """A file name with undecodable bytes (a lone surrogate) made the record unwritable,
    and the handler dropped it: a hostile name could hide the failure it caused. It is
    written escaped, and bidi overrides with it."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}

    def body(path):
        log = logging.getLogger("corral.test")
        root = logging.getLogger()
        # pytest's own capture would keep the lone surrogate in the test's report, which
        # a parallel run (xdist) cannot send between its processes
        captures = [h for h in root.handlers if "LogCapture" in type(h).__name__]
        for handler in captures:
            root.removeHandler(handler)
        try:
            log.error("pull of %s failed", os.fsdecode(b"bad\xffname") + "\u202egpj.exe")
        finally:
            for handler in captures:
                root.addHandler(handler)
        for handler in root.handlers:
            handler.flush()
        text = path.read_text(encoding="utf-8")
        assert text.rstrip("\n").endswith("pull of bad\\udcffname\\u202egpj.exe failed")

    _with_log(env, body)
