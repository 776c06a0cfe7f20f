"""What this host's KVM does, found out with the real QEMU; and fault injection for the
KVM behaviours this host does not have.

:func:`host_kvm` boots the test guest with ``-accel kvm`` straight from ``qemu-system-x86_64``
(no corral code involved) and says ``"absent"`` (no usable ``/dev/kvm``), ``"works"`` (the
guest reached its shell), ``"aborts"`` (QEMU died with a KVM error, as QEMU 10 does here:
``kvm_buf_set_msrs``) or ``"hangs"`` (silent for :data:`PROBE_TIMEOUT` s, as QEMU 7.2 here).

:func:`fake_kvm` puts a ``qemu-system-x86_64`` wrapper first on ``PATH``. Called with
``-accel kvm`` it plays one KVM behaviour; any other call runs the real QEMU unchanged. Every
call's argv is logged, so a test sees which accelerator corral asked for. It is fault
injection and says so: "works" runs the guest under TCG while corral believes it is KVM.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

PROBE_TIMEOUT = 30.0
_REAL = shutil.which("qemu-system-x86_64")
MSRS_ABORT = ("qemu-system-x86_64: ../target/i386/kvm/kvm.c:3000: kvm_buf_set_msrs: "
              "Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.")
NO_DEVICE = ("Could not access KVM kernel module: No such file or directory\n"
             "qemu-system-x86_64: failed to initialize kvm: No such file or directory")

# what the wrapper does with a `-accel kvm` call (shell, after the argv is in "$@")
_TCG = ('set -- $(for a in "$@"; do case "$a" in kvm) echo tcg;; host) echo max;; '
        '*) printf "%s\\n" "$a";; esac; done)\n')
BEHAVIOURS = {
    # QEMU 10 under nested virtualisation: an assertion, then SIGABRT, before it detaches
    "aborts": f"echo {shlex.quote(MSRS_ABORT)} >&2\nkill -ABRT $$\n",
    # a host without /dev/kvm: QEMU refuses the accelerator
    "absent": f"echo {shlex.quote(NO_DEVICE)} >&2\nexit 1\n",
    # a guest that hangs under KVM: it runs, but nothing ever reaches the serial port (the
    # firmware finds no kernel to boot; this host's hang is right after "Probing EDD")
    "hangs": _TCG + 'set -- $(skip=0; for a in "$@"; do if [ $skip = 1 ]; then skip=0; '
                    'continue; fi; case "$a" in -kernel|-initrd|-append) skip=1;; '
                    '*) printf "%s\\n" "$a";; esac; done)\n',
    # working KVM (honestly: TCG under the name; this host's KVM cannot run the guest)
    "works": _TCG,
}


@functools.cache
def real_qemu() -> str:
    """The real QEMU (looked up once, before any wrapper is on PATH)."""
    path = _REAL
    if path is None:
        raise AssertionError("QEMU is not installed (run scripts/setup-lab.sh)")
    return path


def fake_kvm(directory: Path, behaviour: str, monkeypatch) -> Path:
    """Install the wrapper for ``behaviour`` (a key of :data:`BEHAVIOURS`) in ``directory``
    and first on ``PATH``; returns the log of every call's argv (one line each)."""
    real = real_qemu()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "argv.log"
    wrapper = directory / "qemu-system-x86_64"
    wrapper.write_text(
        "#!/bin/sh\nset -f\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'case " $* " in *" -accel kvm "*) ;; *) exec ' + shlex.quote(real) + ' "$@";; esac\n'
        "IFS='\n'\n"  # the rewritten argv is split at newlines only
        + BEHAVIOURS[behaviour]
        + f'exec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    log.touch()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return log


def accels(log: Path) -> list[str]:
    """The ``-accel`` of every VM start logged by the wrapper (not --version and such)."""
    out = []
    for line in log.read_text().splitlines():
        words = line.split()
        if "-accel" in words:
            out.append(words[words.index("-accel") + 1])
    return out


@functools.cache
def host_kvm(kernel: str, initrd: str) -> str:
    """What this host's KVM does with the test guest (see the module docstring)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "absent"
    proc = subprocess.Popen(
        [real_qemu(), "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults",
         "-display", "none", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
         "-append", "console=ttyS0", "-serial", "stdio"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.set_blocking(proc.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + PROBE_TIMEOUT
    try:
        while time.monotonic() < deadline:
            seen += proc.stdout.read() or b""
            if b"corral-guest ready" in seen:
                return "works"
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace")
                if "kvm" not in err.lower():
                    raise AssertionError(f"QEMU failed for another reason than KVM: {err}")
                return "aborts"
            time.sleep(0.1)
        return "hangs"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
