"""Settings and typed values that are not what they look like: TOML's nan and inf, numbers
far out of range, Unicode digits, wrong types. Each is reported with the file, table and
key, and the default is used; nothing hangs or crashes. (How fast the hostile values are
refused is a speed target, measured by tests/bench/bench_parse.py, not asserted here: a
wall-clock bound flakes on a busy machine.)"""

import pytest

from backends.lxc.limits import BY_KEY
from backends.lxd.limits import SPECS, normalise
from backends.units import is_whole, parse_size
from tui.config import load_config
from tui.format import parse_duration


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+inf", "1e308", "-5", "0",
                                   '"10"', "true", "99999999999999999999999"])
def test_numbers_out_of_bounds_are_reported_with_file_and_key(tmp_path, value):
    path = tmp_path / "config.toml"
    path.write_text(f"[ui]\nnetwork_timeout = {value}\nmetrics_interval = {value}\n"
                    f"stop_timeout = {value}\n")
    cfg = load_config(path)
    assert (cfg.network_timeout, cfg.metrics_interval, cfg.stop_timeout) == (10.0, 10.0, 30)
    assert len(cfg.problems) == 3
    for key, default in (("network_timeout", "10"), ("metrics_interval", "10"),
                         ("stop_timeout", "30")):
        problem = next(p for p in cfg.problems if key in p)
        assert problem.startswith(f"{path}: [ui] {key}") and problem.endswith(f"using {default}")


def test_flags_and_text_of_the_wrong_type_use_the_default(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[qemu]\nenabled = "no"\naccel = 3\npath = ["x"]\n[lxc]\nenabled = 0\n'
                    '[ui]\ntheme = "dark\\u001b[31m"\n[console]\ndetach_key = 5\n')
    cfg = load_config(path)
    assert cfg.qemu_enabled is True and cfg.lxc_enabled is True
    assert cfg.qemu_accel == "auto" and cfg.qemu_path == "" and cfg.theme == "corral-dark"
    assert cfg.detach_key == "ctrl+right_square_bracket"
    for key in ("[qemu] enabled", "[qemu] accel", "[qemu] path", "[lxc] enabled",
                "[ui] theme", "[console] detach_key"):
        assert any(key in p and str(path) in p for p in cfg.problems), key


HOSTILE_SIZES = ["١٠MiB", "²GiB", "10\u0660", "9" * 5000, "1" * 21, "1e400", "nan", "inf",
                 "16EiB", "9999999PiB"]
HOSTILE_LIMITS = [("cpus", "٢"), ("cpus", "0-99999999999999999"), ("processes", "١٠٠"),
                  ("memory", "٥٠%"), ("disk_priority", "٣")]


@pytest.mark.parametrize("text", HOSTILE_SIZES)
def test_sizes_are_ascii_and_finite(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_whole_numbers_are_ascii_and_short():
    assert is_whole("12") and not is_whole("١٢") and not is_whole("²")
    assert not is_whole("1" * 16) and not is_whole("") and not is_whole("-1")
    with pytest.raises(ValueError):
        parse_duration("٣d")


@pytest.mark.parametrize("key,text", HOSTILE_LIMITS)
def test_lxd_limits_refuse_unicode_digits_and_huge_sets(key, text):
    from backends.errors import InvalidInput

    spec = next(s for s in SPECS if s.key == key)
    with pytest.raises(InvalidInput):
        normalise(spec, text)


@pytest.mark.parametrize("key,text", [("cpu_weight", "١٠٠"), ("pids", "٣"),
                                      ("cpu_quota", "٥٠"), ("cpuset", "٠-١")])
def test_lxc_limits_refuse_unicode_digits(key, text):
    from backends.errors import InvalidInput

    with pytest.raises(InvalidInput):
        BY_KEY[key].to_v2(text)


def test_control_characters_are_made_visible_one_for_one():
    from tui.format import printable

    text = "a\x1b[2Jb\x07c\x9b31md\u202ee\tf\ng\x7f"
    shown = printable(text)
    assert len(shown) == len(text)
    assert all(c.isprintable() for c in shown)
    assert shown.startswith("a\u241b[2Jb\u2407c")
    kept = printable(text, lines=True)
    assert "\n" in kept and "\t" in kept


def test_the_serial_log_limit_reaches_the_qemu_backend(tmp_path):
    from backends.console.serial_log import SERIAL_LOG_MAX
    from backends.qemu import QEMUBackend
    from backends.local import qemu_remote

    path = tmp_path / "config.toml"
    assert load_config(path).backend_options("qemu")["serial_log_max"] == SERIAL_LOG_MAX
    path.write_text("[qemu]\nserial_log_mib = 0.5\n")
    cfg = load_config(path)
    assert cfg.backend_options("qemu")["serial_log_max"] == SERIAL_LOG_MAX
    assert any("[qemu] serial_log_mib = 0.5" in p for p in cfg.problems), cfg.problems
    path.write_text("[qemu]\nserial_log_mib = 16\n")
    options = load_config(path).backend_options("qemu")
    backend = QEMUBackend(qemu_remote(str(tmp_path / "vms")), **options)
    assert backend.serial_log_max == 16 << 20
