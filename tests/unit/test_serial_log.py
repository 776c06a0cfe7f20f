"""The serial log's bounds: trimmed past its limit, its end kept in ``.prev``, looked at
often enough that it stays within a quarter of the limit above it (the QEMU flood test in
tests/backends/test_faults_qemu.py shows it with a real guest)."""

from backends.console.serial_log import KEEP, SERIAL_LOG_MAX, check_every, read_tail, trim


def test_a_log_past_its_limit_keeps_its_end_in_prev(tmp_path):
    log = tmp_path / "serial.log"
    data = bytes(range(256)) * 2048  # 512 KiB
    log.write_bytes(data)
    assert not trim(str(log), limit=len(data))  # at the limit: kept
    assert trim(str(log), limit=256 << 10)
    assert log.stat().st_size == 0
    assert (tmp_path / "serial.log.prev").read_bytes() == data[-(64 << 10):]  # limit / 4
    with open(log, "ab") as f:  # QEMU appends at the new end
        f.write(b"after")
    assert read_tail(str(log), 10) == data[-5:] + b"after"


def test_the_default_limit_keeps_a_mib_and_looks_once_per_mib():
    assert SERIAL_LOG_MAX == 4 << 20 and KEEP == 1 << 20
    assert check_every(SERIAL_LOG_MAX) == 1 << 20
    assert check_every(256 << 10) == 64 << 10
    assert check_every(1 << 30) == 1 << 20  # a stat per MiB at most
