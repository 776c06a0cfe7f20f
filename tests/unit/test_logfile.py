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
