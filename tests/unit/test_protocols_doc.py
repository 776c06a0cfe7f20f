"""docs/protocols.md describes the mechanisms as built: the CLI step of adding a remote
issues no token (it trusts the CLI's certificate over corral's pinned connection), and
LXC files are opened with openat2 beneath the container's root, not walked with lstat."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocols.md"


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_adding_a_remote_issues_no_token_for_the_cli():
    text = section("Adding a remote")
    assert '"token": true' not in text and "--password TOKEN" not in text
    assert '"certificate"' in text and "servercerts/<name>.crt" in text
    assert "query <name>:/1.0" in text


def test_lxc_files_are_opened_beneath_the_root_with_openat2():
    text = section("Files")
    assert "lstat" not in text
    assert "openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)" in text
