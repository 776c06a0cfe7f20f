"""The one size parser of every backend and dialog (``backends.units``): ``2G`` is 2 GiB
everywhere, ``2GB`` is 2·10⁹ bytes, and what a daemon says back is read leniently."""

from __future__ import annotations

import pytest

from backends import units
from backends.units import format_size, parse_size, size_or_none

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize("text, expected", [
    ("2G", 2 * GiB),
    ("2GiB", 2 * GiB),
    ("2 GiB", 2 * GiB),
    (" 2gib ", 2 * GiB),
    ("2g", 2 * GiB),
    ("512M", 512 * MiB),
    ("512MiB", 512 * MiB),
    ("64K", 64 * KiB),
    ("64KiB", 64 * KiB),
    ("1T", TiB),
    ("1.5G", 3 * GiB // 2),
    ("1.5GiB", 3 * GiB // 2),
    ("0.5MiB", 512 * KiB),
    ("1024", 1024),
    ("1024B", 1024),
    ("0", 0),
])
def test_binary_sizes_and_plain_bytes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("2GB", 2_000_000_000),
    ("2gb", 2_000_000_000),
    ("10MB", 10_000_000),
    ("10KB", 10_000),
    ("1TB", 10**12),
    ("1.5GB", 1_500_000_000),
])
def test_decimal_sizes_need_the_b(text, expected):
    assert parse_size(text) == expected


def test_the_bug_2g_is_2_gib_not_2_gb():
    """The resource editor read ``2G`` as 2 GB while the wizard read 2 GiB."""
    assert parse_size("2G") == parse_size("2GiB") == 2 * 1024**3
    assert parse_size("2GB") == 2 * 10**9
    assert parse_size("2G") != parse_size("2GB")


def test_default_unit_applies_to_plain_numbers_only():
    assert parse_size("512", default_unit="MiB") == 512 * MiB
    assert parse_size("10", default_unit="GiB") == 10 * GiB
    assert parse_size("1.5", default_unit="GiB") == 3 * GiB // 2
    assert parse_size("2", default_unit="GB") == 2 * 10**9
    # a unit typed by the user wins over the default
    assert parse_size("2G", default_unit="MiB") == 2 * GiB
    assert parse_size("2GB", default_unit="MiB") == 2 * 10**9
    assert parse_size("512B", default_unit="MiB") == 512
    # no default: bytes
    assert parse_size("512") == 512


@pytest.mark.parametrize("text", [
    "", "   ", "abc", "G", "GiB", "2X", "2 X", "-1G", "+1G", "2iB", "1,5G", "2 G B",
    "1e3", "0x10", "2GiBB", "12MiB!", "∞",
])
def test_what_is_not_a_size_is_refused_in_words(text):
    with pytest.raises(ValueError) as refused:
        parse_size(text)
    message = str(refused.value)
    assert f"'{text}'" in message, message  # names what was typed
    assert "size" in message and "GiB" in message  # says what a size looks like


def test_fractional_bytes_are_refused_in_words():
    with pytest.raises(ValueError, match="whole"):
        parse_size("1.5")
    with pytest.raises(ValueError, match="whole"):
        parse_size("1.5B")


def test_none_is_refused():
    with pytest.raises(ValueError):
        parse_size(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [None, "", "50%", "junk", "2X", "1.5", "-1G", "unlimited"])
def test_size_or_none_reads_anything_that_is_not_a_size_as_none(text):
    assert size_or_none(text) is None


@pytest.mark.parametrize("text, expected", [
    ("2G", 2 * GiB), ("2GiB", 2 * GiB), ("2GB", 2 * 10**9), ("1073741824", GiB),
    ("512MB", 512 * 10**6), (" 256MiB ", 256 * MiB),
])
def test_size_or_none_reads_sizes_like_parse_size(text, expected):
    assert size_or_none(text) == expected == parse_size(text)


def test_size_or_none_takes_numbers_too():
    assert size_or_none(1024) == 1024  # type: ignore[arg-type]


@pytest.mark.parametrize("value, text", [
    (0, "0B"),
    (1, "1B"),
    (1000, "1000B"),
    (1536, "1536B"),
    (KiB, "1KiB"),
    (512 * MiB, "512MiB"),
    (3 * GiB // 2, "1536MiB"),
    (2 * GiB, "2GiB"),
    (1024 * GiB, "1TiB"),
    (10**9, "1000000000B"),
    (1024**5, "1PiB"),
    (1024**6, "1EiB"),
])
def test_format_size_is_the_shortest_exact_binary_size(value, text):
    assert format_size(value) == text


@pytest.mark.parametrize("value", [
    0, 1, 511, 512, 1000, 1023, 1024, 1536, 4096, 10**6, 10**9, 2 * 10**9, 3 * GiB // 2,
    512 * MiB, 2 * GiB, 10 * GiB + 512, 1024**4, 5 * 1024**5, 1024**6, 2**53,
])
def test_format_then_parse_gives_the_same_bytes(value):
    assert parse_size(format_size(value)) == value
    assert size_or_none(format_size(value)) == value


@pytest.mark.parametrize("text, value", [
    ("9007199254740993", 2**53 + 1),
    ("9007199254740993B", 2**53 + 1),
    ("9223372036854775807B", 2**63 - 1),
    ("8796093022208.5KiB", 2**53 + 512),
])
def test_large_sizes_are_exact(text, value):
    """Bytes are whole numbers: a size is not read through a float (which is exact only up
    to 2**53), so what ``format_size`` wrote comes back to the byte."""
    assert parse_size(text) == value
    assert parse_size(format_size(value)) == value


@pytest.mark.parametrize("text", ["2G", "2GiB", "512M", "1.5G", "64KiB", "1T", "4096"])
def test_parse_then_format_then_parse_is_stable(text):
    value = parse_size(text)
    assert parse_size(format_size(value)) == value


@pytest.mark.parametrize("text", ["2G", "2GiB", "2GB", "512MiB", "512MB", "1.5GiB", "1.5G",
                                  "1024", "64K"])
def test_lxd_convert_reads_sizes_as_units_does(text):
    """The LXD converter (instance memory limits) agrees with the parser of the wizard and
    of the resource editor."""
    from backends.lxd import convert

    assert convert.parse_size(text) == units.parse_size(text)


def test_lxd_convert_reads_2g_as_2_gib():
    from backends.lxd import convert

    assert convert.parse_size("2G") == 2 * GiB
    assert convert.parse_size("2GB") == 2 * 10**9
    for junk in (None, "", "50%", "lots"):
        assert convert.parse_size(junk) is None  # a daemon's odd value is "no limit"


@pytest.mark.parametrize("n, shown, cli", [
    (0, "0 B", "0B"),
    (1023, "1023 B", "1023B"),
    (1536, "1.5 KiB", "1.50KiB"),
    (1 << 20, "1.0 MiB", "1.00MiB"),
    (26929444044, "25.1 GiB", "25.08GiB"),
    (1 << 50, "1024.0 TiB", "1024.00TiB"),  # TiB is the largest unit shown
])
def test_human_size_rounds_for_reading(n, shown, cli):
    assert units.human_size(n) == shown
    assert units.human_size(n, decimals=2, sep="") == cli


def test_libvirt_xml_sizes():
    """One reading of libvirt's ``unit`` attribute for the importer and the backend."""
    from backends.units import libvirt_bytes

    assert libvirt_bytes("1048576", None) == 1 << 30  # KiB by default
    assert libvirt_bytes("2", "GiB") == libvirt_bytes("2", "g") == 2 << 30
    assert libvirt_bytes("2", "GB") == 2 * 1000**3
    assert libvirt_bytes("512", "bytes") == 512
    assert libvirt_bytes("12", "furlongs") is None
    assert libvirt_bytes("1.5", "GiB") is None and libvirt_bytes("", "KiB") is None
