"""A private libvirt for the tests: a ``libvirtd`` the suite starts, never the host's, and an
sshd on loopback in front of it, so that one daemon is reached both over its unix socket and
over ``qemu+ssh://`` like a server.

The daemon runs as root in a mount namespace of its own (``unshare --mount``) where a tmpfs
covers ``/run`` and ``/etc/libvirt``, ``/var/lib/libvirt``, ``/run/libvirt``,
``/var/cache/libvirt`` and ``/var/log/libvirt`` are bind mounts of directories in the lab's
temp dir: it is a real ``qemu:///system`` (privileged, with the system paths it always uses)
whose every file is the lab's. Its socket is ``<root>/run/libvirt-sock`` seen from outside.
The sshd runs in the same namespace (``nsenter``), so a client's ``virt-ssh-helper`` on the
far side finds that daemon at the usual ``/run/libvirt/libvirt-sock``: the SSH URI names no
socket, as for a real server. sshd has its own host key and ``authorized_keys``; clients
pin the host key with ``known_hosts=`` (a file of the lab's) and log in with ``keyfile=``.

QEMU under this libvirt runs TCG (``<domain type='qemu'>``), as root, without cgroups,
namespaces or a security driver (``qemu.conf``). Every process the lab leaves is found by its
mount namespace and killed at the end.

``python tests/lab_libvirt.py`` starts one by hand and prints its URIs (Ctrl+C stops it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import lab as labmod

ROOT_PREFIX = "corral-lab-libvirt-"
TOOLS = ("libvirtd", "sshd", "ssh", "ssh-keygen", "unshare", "nsenter", "qemu-system-x86_64")
BINDS = {"etc": "/etc/libvirt", "lib": "/var/lib/libvirt", "run": "/run/libvirt",
         "cache": "/var/cache/libvirt", "log": "/var/log/libvirt"}

LIBVIRTD_CONF = """\
unix_sock_group = "root"
unix_sock_ro_perms = "0770"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
listen_tls = 0
listen_tcp = 0
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
host_uuid = "{host_uuid}"
"""

QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
migration_address = "{address}"
migration_host = "{address}"
migration_port_min = {ports[0]}
migration_port_max = {ports[1]}
"""

SSHD_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {ssh}/host_ed25519
AuthorizedKeysFile {ssh}/authorized_keys
PidFile {ssh}/sshd.pid
PermitRootLogin yes
PubkeyAuthentication yes
# offered, so that a client without an accepted key is asked for one (and must refuse)
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
Subsystem sftp internal-sftp
"""

GUEST_XML = """\
<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{memory}</memory>
  <vcpu{current}>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{emulator}</emulator>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <memballoon model='{balloon}'/>{disk}
  </devices>
</domain>
"""
"""The lab's test guest (``tests/qemu_guest.py``'s kernel and busybox initramfs) on a
serial console. busybox init ignores the ACPI power button: a graceful shutdown of it
never ends (the stubborn guest), ``poweroff -f`` typed on its console does."""


def unavailable_reason() -> str | None:
    """Why the private libvirt cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "the private libvirt needs root (a privileged daemon in its own namespace)"
    missing = [t for t in TOOLS if shutil.which(t) is None
               and not os.path.exists(f"/usr/sbin/{t}")]
    if missing:
        return f"missing {', '.join(missing)} (run scripts/setup-lab.sh)"
    try:
        import libvirt  # noqa: F401
    except ImportError as e:
        return f"the libvirt Python binding does not import ({e}); install corral's test group"
    return None


def guest_xml(name: str, kernel: Path, initrd: Path, memory_mib: int = 128,
              disk: Path | None = None, *, disks: tuple[tuple[Path, str], ...] = (),
              vcpus: int = 1, current_vcpus: int | None = None, balloon: bool = False,
              vnc: bool = False) -> str:
    """The test guest's domain XML. ``disk``: a raw disk; ``disks``: ``(path, format)``
    of each disk (vda, vdb, …); ``current_vcpus`` below ``vcpus`` leaves room to add vCPUs
    live; ``balloon`` adds a virtio balloon (the guest loads its driver); ``vnc`` a VNC
    screen listening on a unix socket libvirt picks (and its default VGA card)."""
    emulator = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
    all_disks = (((disk, "raw"),) if disk is not None else ()) + tuple(disks)
    disk_xml = "".join(
        f"\n    <disk type='file' device='disk'><driver name='qemu' type='{fmt}'/>"
        f"<source file='{path}'/><target dev='vd{chr(ord('a') + i)}' bus='virtio'/></disk>"
        for i, (path, fmt) in enumerate(all_disks))
    if vnc:
        disk_xml += "\n    <graphics type='vnc'><listen type='socket'/></graphics>"
    current = f" current='{current_vcpus}'" if current_vcpus is not None else ""
    return GUEST_XML.format(name=name, kernel=kernel, initrd=initrd, memory=memory_mib,
                            emulator=emulator, disk=disk_xml, vcpus=vcpus, current=current,
                            balloon="virtio" if balloon else "none")


SECOND = {"hostname": "corral-lab-b", "migration_address": "127.0.0.3",
          "migration_ports": (49280, 49343)}
"""The second lab host (``session_lab(request, second=True)``): libvirt refuses to migrate
to the same host, which it knows by the host UUID (``host_uuid``, each lab its own) and
the hostname (the second lab's daemon runs in a UTS namespace of its own with this one);
its QEMUs take migration ports from another range on another loopback address (libvirt
refuses 127.0.0.1 itself as ``migration_host``)."""


def session_lab(request, *, second: bool = False) -> "LibvirtLab":
    """The one private libvirt of this test session (started on first use, stopped at the
    end, also on failure); ``second``: the other lab host, for migrations between two. A
    machine that cannot run it fails the test, never skips it."""
    import pytest

    config, key = request.config, "_corral_libvirt_lab2" if second else "_corral_libvirt_lab"
    lab = getattr(config, key, None)
    if isinstance(lab, LibvirtLab):
        return lab
    if isinstance(lab, str):
        pytest.fail(lab, pytrace=False)
    reason = unavailable_reason()
    if reason:
        setattr(config, key, f"the private libvirt cannot run here: {reason}")
        pytest.fail(getattr(config, key), pytrace=False)
    sweep_stale()
    lab = LibvirtLab(**SECOND) if second else LibvirtLab()
    config.add_cleanup(lab.stop)
    try:
        lab.start()
    except Exception as e:  # said in the failure
        setattr(config, key, f"the private libvirt failed to start: {e}")
        pytest.fail(getattr(config, key), pytrace=False)
    setattr(config, key, lab)
    return lab


def define(lab: "LibvirtLab", xml: str) -> None:
    """Define a domain on the lab's daemon (over its socket, as an admin would)."""
    import libvirt

    conn = libvirt.open(lab.unix_uri)
    try:
        conn.defineXML(xml)
    finally:
        conn.close()


def _which(tool: str) -> str:
    return shutil.which(tool) or f"/usr/sbin/{tool}"


def _keygen(path: Path) -> str:
    subprocess.run([_which("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "corral-lab",
                    "-f", str(path)], check=True, capture_output=True)
    return (path.with_suffix(".pub") if path.suffix else Path(f"{path}.pub")).read_text().strip()


class LibvirtLab:
    """One private libvirtd and its sshd (see the module docstring)."""

    def __init__(self, hostname: str = "", migration_address: str = "127.0.0.2",
                 migration_ports: tuple[int, int] = (49152, 49215)) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.hostname = hostname
        """Its own hostname (a UTS namespace), or "" for the machine's."""
        self.migration_address, self.migration_ports = migration_address, migration_ports
        """Where its QEMUs listen for an incoming migration (the other lab connects there)."""
        self.host_uuid = str(uuid.uuid4())
        self.ssh = self.root / "ssh"
        self.port = labmod._free_port()
        self.daemon: subprocess.Popen | None = None
        self.sshd: subprocess.Popen | None = None
        self.namespace = ""
        """``mnt:[inode]`` of the lab's mount namespace (found in /proc)."""

    # -- what clients use
    @property
    def socket(self) -> Path:
        return self.root / "run" / "libvirt-sock"

    @property
    def images(self) -> Path:
        """``/var/lib/libvirt/images`` of this lab host (its ``default`` pool), seen from
        outside: a disk there is this host's own, not seen by the other lab."""
        return self.root / "lib" / "images"

    @property
    def unix_uri(self) -> str:
        return f"qemu+unix:///system?socket={self.socket}"

    def ssh_uri(self, *, keyfile: Path | None = None, known_hosts: Path | None = None) -> str:
        keyfile = keyfile or self.ssh / "id_ed25519"
        known_hosts = known_hosts or self.ssh / "known_hosts"
        return (f"qemu+ssh://root@127.0.0.1:{self.port}/system"
                f"?keyfile={keyfile}&known_hosts={known_hosts}&no_verify=0")

    # -- starting and stopping
    def start(self) -> None:
        (self.root / "owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
        for sub in BINDS:
            (self.root / sub).mkdir(mode=0o755)
        self.images.mkdir(mode=0o755)
        (self.root / "etc" / "libvirtd.conf").write_text(
            LIBVIRTD_CONF.format(host_uuid=self.host_uuid))
        (self.root / "etc" / "qemu.conf").write_text(QEMU_CONF.format(
            address=self.migration_address, ports=self.migration_ports))
        self._ssh_files()
        self.start_daemon()
        self._start_sshd()
        self._default_pool()

    def _default_pool(self) -> None:
        """The ``default`` directory pool on ``/var/lib/libvirt/images``, as a host made by
        virt-manager has: libvirt makes a migrated domain's disk there before copying it."""
        import libvirt

        conn = libvirt.open(self.unix_uri)
        try:
            pool = conn.storagePoolDefineXML(
                "<pool type='dir'><name>default</name><target>"
                "<path>/var/lib/libvirt/images</path></target></pool>")
            pool.create()
            pool.setAutostart(True)
        finally:
            conn.close()

    def _ssh_files(self) -> None:
        self.ssh.mkdir(mode=0o700)
        host = _keygen(self.ssh / "host_ed25519")
        _keygen(self.ssh / "other_host_ed25519")
        client = _keygen(self.ssh / "id_ed25519")
        _keygen(self.ssh / "stranger_ed25519")  # a key sshd does not accept
        (self.ssh / "authorized_keys").write_text(client + "\n")
        (self.ssh / "sshd_config").write_text(SSHD_CONFIG.format(port=self.port, ssh=self.ssh))
        # known_hosts as `ssh` writes it for a non-default port
        key = " ".join(host.split()[:2])
        (self.ssh / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {key}\n")
        other = " ".join((self.ssh / "other_host_ed25519.pub").read_text().split()[:2])
        (self.ssh / "known_hosts_changed").write_text(f"[127.0.0.1]:{self.port} {other}\n")
        (self.ssh / "known_hosts_empty").write_text("")

    def _mounts(self) -> str:
        lines = ["set -e", *([f"hostname '{self.hostname}'"] if self.hostname else []),
                 "mount -t tmpfs -o mode=0755 corral-lab-run /run",
                 "mkdir -p /run/libvirt /run/sshd /run/lock"]
        lines += [f"mount --bind '{self.root / sub}' '{target}'" for sub, target in BINDS.items()]
        return "\n".join(lines)

    def daemon_report(self) -> str:
        """Whether libvirtd still runs, and the end of its logs (for a failure message)."""
        alive = self.daemon is not None and self.daemon.poll() is None
        state = "running" if alive else f"exited ({self.daemon.returncode if self.daemon else '-'})"
        return (f"libvirtd {state}; libvirtd.out:\n{labmod._tail(self.root / 'libvirtd.out', 15)}"
                f"\nlibvirtd.log:\n{labmod._tail(self.root / 'log' / 'libvirtd.log', 15)}")

    def start_daemon(self) -> None:
        """Start libvirtd: in a new namespace the first time, in the lab's (through its sshd)
        after :meth:`kill_daemon`."""
        argv = [_which("libvirtd"), "--config", "/etc/libvirt/libvirtd.conf",
                "--pid-file", str(self.root / "libvirtd.pid")]
        log = open(self.root / "libvirtd.out", "ab")  # the child keeps it
        env = labmod._clean_env()
        if self.sshd is not None and labmod._pid_alive(self.sshd.pid):
            cmd = [_which("nsenter"), f"--target={self.sshd.pid}", *self._spaces(), "--",
                   *argv]
        else:
            script = self._mounts() + "\nexec " + " ".join(f"'{a}'" for a in argv)
            cmd = [_which("unshare"), *self._spaces(), "--propagation", "private", "--",
                   "/bin/sh", "-c", script]
        self.daemon = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       env=env, start_new_session=True)
        log.close()
        self._wait_socket()
        self.namespace = os.readlink(f"/proc/{self.daemon.pid}/ns/mnt")

    def _spaces(self) -> list[str]:
        """The namespaces of the lab (``unshare``'s and ``nsenter``'s options alike)."""
        return ["--mount", "--uts"] if self.hostname else ["--mount"]

    def _wait_socket(self, timeout: float = 30) -> None:
        import libvirt

        deadline = time.monotonic() + timeout
        while True:
            if self.daemon is not None and self.daemon.poll() is not None:
                raise labmod.LabError(f"libvirtd exited ({self.daemon.returncode}): "
                                      f"{labmod._tail(self.root / 'libvirtd.out')}\n"
                                      f"{labmod._tail(self.root / 'log' / 'libvirtd.log')}")
            if self.socket.exists():
                try:
                    libvirt.open(self.unix_uri).close()
                    return
                except libvirt.libvirtError:
                    pass
            if time.monotonic() > deadline:
                raise labmod.LabError(f"libvirtd did not answer on {self.socket} within "
                                      f"{timeout} s: {labmod._tail(self.root / 'libvirtd.out')}")
            time.sleep(0.1)

    def _start_sshd(self) -> None:
        assert self.daemon is not None
        log = open(self.ssh / "sshd.log", "ab")
        self.sshd = subprocess.Popen(
            [_which("nsenter"), f"--target={self.daemon.pid}", *self._spaces(), "--",
             _which("sshd"), "-D", "-e", "-f", str(self.ssh / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=labmod._clean_env(),
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + 15
        import socket

        while True:
            if self.sshd.poll() is not None:
                raise labmod.LabError(f"sshd exited: {labmod._tail(self.ssh / 'sshd.log')}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if time.monotonic() > deadline:
                raise labmod.LabError(f"sshd did not listen: {labmod._tail(self.ssh / 'sshd.log')}")
            time.sleep(0.05)

    def kill_daemon(self, sig: int = signal.SIGKILL) -> None:
        """Kill libvirtd (its domains keep running, as when a real daemon dies)."""
        if self.daemon is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.daemon.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.daemon.wait(10)
                with contextlib.suppress(FileNotFoundError):
                    self.socket.unlink()

    def pids(self) -> list[int]:
        """Every process in the lab's mount namespace (libvirtd, sshd, QEMU, ssh sessions)."""
        found = []
        for pid in labmod._all_pids():
            with contextlib.suppress(OSError):
                if self.namespace and os.readlink(f"/proc/{pid}/ns/mnt") == self.namespace:
                    found.append(pid)
        return found

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.daemon.pid, signal.SIGCONT)  # a test may have stopped it
        for proc in (self.sshd, self.daemon):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
        left = self.pids()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        labmod._wait_dead(left, 10)
        for proc in (self.sshd, self.daemon):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)


def _start_time(pid: int) -> str:
    """When ``pid`` started (field 22 of its stat): a pid reused later is another process."""
    stat = labmod._read_proc(pid, "stat").decode(errors="replace")
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def sweep_stale() -> list[str]:
    """Stop and remove the labs of test runs that died without stopping them (killed by a
    time-out or SIGKILL): every process in such a lab's namespace, then its directory. A
    lab whose owner still runs is left alone. Returns the directories removed."""
    removed = []
    tmp = Path("/tmp")
    for root in tmp.glob(f"{ROOT_PREFIX}*"):
        try:
            pid, started = (root / "owner").read_text().split()
            alive = labmod._pid_alive(int(pid)) and _start_time(int(pid)) == started
        except (OSError, ValueError):
            alive = True  # no owner written (yet): not ours to judge
        if alive:
            continue
        mine = os.readlink("/proc/self/ns/mnt")
        pids = labmod._all_pids()
        seeds = [p for p in pids if str(root).encode() in labmod._read_proc(p, "cmdline")]
        spaces = set()
        for p in seeds:
            with contextlib.suppress(OSError):
                spaces.add(os.readlink(f"/proc/{p}/ns/mnt"))
        spaces.discard(mine)
        victims = set(seeds)
        for p in pids:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{p}/ns/mnt") in spaces:
                    victims.add(p)
        for p in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)
                os.kill(p, signal.SIGKILL)
        labmod._wait_dead(victims, 10)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(str(root))
    return removed


def main() -> int:
    reason = unavailable_reason()
    if reason:
        print(reason)
        return 1
    def interrupted(*_args):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)  # also when started in the background
    sweep_stale()
    lab = LibvirtLab()
    try:
        lab.start()
        print(f"unix: {lab.unix_uri}\nssh:  {lab.ssh_uri()}\nroot: {lab.root}", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        lab.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
