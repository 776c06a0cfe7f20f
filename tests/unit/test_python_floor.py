"""The package admits no Python that lacks tarfile's extraction filters (PEP 706, added in
3.11.4), which the one archive reader needs to unpack archives safely."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


def test_requires_python_has_tarfile_extraction_filters():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = SpecifierSet(project["requires-python"])
    assert not allowed.contains("3.11.3") and not allowed.contains("3.10.12")
    assert allowed.contains("3.11.4") and allowed.contains("3.12.0")
