"""A real 3-member LXD (or Incus) cluster on loopback, for corral's cluster tests.

Three daemons with their own dirs, each listening on ``127.0.0.1:<free port>`` for both the API
(``core.https_address``) and the cluster (``cluster.https_address``). Member 1 bootstraps the
cluster with ``init --preseed`` (``cluster.enabled``, a ``dir`` pool named ``local`` and the
default profile's root disk on it); members 2 and 3 join with a token from ``cluster add mN`` and
a preseed holding ``cluster_token``, ``server_address`` and a ``member_config`` that gives the
``dir`` pool an empty ``source``. Forming the cluster takes a few seconds.

A private HOME holds a CLI config with one HTTPS remote, ``clu``, added with a trust token the
real ``remote add`` consumed (so its certificate is pinned like a user's); its ``local`` remote
is member 1's unix socket.

    with Cluster("lxd") as clu:
        clu.cli("launch", "busybox", "c1", "--target", "m2")
        clu.members[2].kill()          # SIGKILL m3's daemon
        clu.members[2].start()         # and back

docs/lab.md ("Clusters") explains the quirks. Stdlib + PyYAML only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Self

import yaml
from lab import (  # tests/ is on sys.path
    IMAGE_ALIAS,
    CliError,
    Daemon,
    Lab,
    LabError,
    _all_pids,
    _clean_env,
    _free_port,
    _read_proc,
    _run_parallel,
    build_busybox_image,
    mounts_under,
    unavailable_reason,
    unmount_under,
)

__all__ = ["CLUSTER_REMOTE", "POOL", "Cluster", "ClusterMember"]

CLUSTER_REMOTE = "clu"
POOL = "local"
TRUST_NAME = "corral-cluster-test"


class ClusterMember(Daemon):
    """One member: a Daemon whose first start is a bootstrap or a join, not a standalone setup."""

    def __init__(self, kind: str, name: str, dir: Path, admin_conf: Path, admin_home: Path,
                 cluster: Cluster, index: int):
        super().__init__(kind, name, dir, admin_conf, admin_home)
        self.cluster = cluster
        self.index = index
        self.https_address = f"127.0.0.1:{_free_port()}"

    @property
    def url(self) -> str:
        return f"https://{self.https_address}"

    def _read_cert(self) -> None:
        # Members answer HTTPS with the shared cluster certificate, not their own server.crt.
        cert = self.dir / "cluster.crt"
        self.cert_pem = (cert if cert.exists() else self.dir / "server.crt").read_text()
        self.fingerprint = hashlib.sha256(ssl.PEM_cert_to_DER_cert(self.cert_pem)).hexdigest()

    def _spawn_ready(self) -> None:
        self._spawn()
        self._wait_ready()

    def _init_preseed(self, preseed: dict) -> None:
        if self.kind == "lxd":
            cmd = [shutil.which("lxd") or "lxd", "init", "--preseed"]
        else:
            cmd = [shutil.which("incus") or "incus", "admin", "init", "--preseed"]
        text = yaml.safe_dump(preseed, sort_keys=False)
        proc = subprocess.run(cmd, env=self._env(), input=text, capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise CliError(cmd, proc)

    def _setup(self) -> None:
        if self.index == 0:
            self._init_preseed({
                "config": {"core.https_address": self.https_address,
                           "cluster.https_address": self.https_address},
                "cluster": {"server_name": self.name, "enabled": True},
                "storage_pools": [{"name": POOL, "driver": "dir"}],
                "profiles": [{"name": "default", "devices": {
                    "root": {"path": "/", "pool": POOL, "type": "disk"}}}],
            })
        else:
            token = self.cluster.join_token(self.name)
            self._init_preseed({
                "config": {"core.https_address": self.https_address},
                "cluster": {
                    "enabled": True, "server_name": self.name,
                    "server_address": self.https_address, "cluster_token": token,
                    "member_config": [{"entity": "storage-pool", "name": POOL,
                                       "key": "source", "value": ""}],
                },
            })
        self._read_cert()


class Cluster:
    """Members m1..mN of one LXD or Incus cluster under one root, with a CLI config in a HOME."""

    def __init__(self, kind: str = "lxd", root: Path | None = None, size: int = 3):
        self.kind = kind
        self._owns_root = root is None
        self.root = (Path(tempfile.mkdtemp(prefix=f"corral-{kind}-cluster-")) if root is None
                     else Path(root).absolute())
        admin = self.root / "admin"
        self.members = [
            ClusterMember(kind, f"m{i + 1}", self.root / f"m{i + 1}", admin / f"m{i + 1}",
                          admin / "home", self, i)
            for i in range(size)
        ]
        self.home = self.root / "home"
        self.xdg_config = self.home / ".config"
        self.conf = self.xdg_config / ("lxc" if kind == "lxd" else "incus")
        self.image_dir = self.root / "image"
        self.timings: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<Cluster {self.kind} {self.root} {self.members}>"

    @property
    def leader(self) -> ClusterMember:
        return self.members[0]

    @property
    def client(self) -> str:
        return self.leader.client

    def member(self, name: str) -> ClusterMember:
        return next(m for m in self.members if m.name == name)

    def join_token(self, name: str) -> str:
        out = self.cli("cluster", "add", name).stdout
        lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
        if not lines:
            raise LabError(f"`cluster add {name}` printed no token")
        return lines[-1]

    # -- the CLI, through any member that is up
    def cli(self, *args: str, check: bool = True, timeout: float = 120,
            via: ClusterMember | None = None) -> subprocess.CompletedProcess:
        """Run ``lxc ARGS`` / ``incus ARGS`` on a member's unix socket (the first alive one)."""
        member = via or next((m for m in self.members if m.alive()), self.leader)
        return member.cli(*args, check=check, timeout=timeout)

    def cli_json(self, *args: str) -> list | dict:
        return json.loads(self.cli(*args, "--format", "json").stdout)

    def wait_online(self, timeout: float = 90) -> None:
        """Until every member is up and the cluster itself says so (after a member was
        killed and started again, its heartbeat takes a while to catch up)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.cli("cluster", "list", "--format", "json", check=False, timeout=30)
            try:
                states = [m["status"] for m in json.loads(r.stdout)]
            except ValueError:
                states = []
            if states and all(s == "Online" for s in states):
                return
            if time.monotonic() > deadline:
                raise LabError(f"cluster members not all online after {timeout} s: {states}")
            time.sleep(0.5)

    def locations(self) -> dict[str, str]:
        """instance name -> member, as ``list -c nL`` prints it."""
        out = self.cli("list", "--format", "csv", "-c", "nL").stdout
        return dict(line.split(",", 1) for line in out.splitlines() if line)

    # -- environment for corral
    def env_vars(self) -> dict[str, str]:
        conf_var = "LXD_CONF" if self.kind == "lxd" else "INCUS_CONF"
        dir_var = "LXD_DIR" if self.kind == "lxd" else "INCUS_DIR"
        return {
            "HOME": str(self.home),
            conf_var: str(self.conf),
            dir_var: str(self.leader.dir),
            "XDG_CONFIG_HOME": str(self.xdg_config),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
        }

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = _clean_env(base)
        env.update(self.env_vars())
        return env

    # -- start / stop
    def start(self) -> None:
        reason = unavailable_reason((self.kind,))
        if reason:
            raise LabError(reason)
        t0 = time.monotonic()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.root.chmod(0o711)
            for d in (self.xdg_config, self.home / ".local" / "share",
                      self.home / ".local" / "state", self.home / ".cache"):
                d.mkdir(parents=True, exist_ok=True)
            (self.root / "run").mkdir(mode=0o700, exist_ok=True)
            errors = _run_parallel({
                "image": lambda: build_busybox_image(self.image_dir),
                **{m.name: m._spawn_ready for m in self.members},
            })
            Lab._raise(errors)
            # Members join one at a time: each join is a database membership change.
            for m in self.members:
                m._setup()
                m._set_up = True
            self.timings["formed"] = time.monotonic() - t0
            self.cli("image", "import", str(self.image_dir / "busybox.tar.gz"),
                     "--alias", IMAGE_ALIAS)
            self._add_remote()
            self.timings["total"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def _add_remote(self) -> None:
        if self.kind == "lxd":
            out = self.cli("config", "trust", "add", "--name", TRUST_NAME).stdout
        else:
            out = self.cli("config", "trust", "add", TRUST_NAME).stdout
        token = [ln.strip() for ln in out.splitlines() if ln.strip()][-1]
        cmd = [self.client, "remote", "add", CLUSTER_REMOTE, token]
        env = self.env()
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60, check=False)
        if r.returncode != 0:
            raise CliError(cmd, r)
        pinned = (self.conf / "servercerts" / f"{CLUSTER_REMOTE}.crt").read_text()
        if ssl.PEM_cert_to_DER_cert(pinned) != ssl.PEM_cert_to_DER_cert(self.leader.cert_pem):
            raise LabError("the pinned cluster certificate is not the cluster's")

    def set_remote_addresses(self, addresses: list[str]) -> None:
        """Rewrite the ``clu`` remote's ``addr`` (Incus accepts several, comma-separated)."""
        path = self.conf / "config.yml"
        config = yaml.safe_load(path.read_text())
        config["remotes"][CLUSTER_REMOTE]["addr"] = ",".join(addresses)
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    def stop(self) -> None:
        """Stop every member, unmount, remove a temp root. Never raises."""
        t0 = time.monotonic()
        # Stop the instances through one member first, then the daemons in parallel.
        try:
            alive = [m for m in self.members if m.alive()]
            if len(alive) == len(self.members):
                alive[0]._force_stop_instances(timeout=30)
        except BaseException as e:
            print(f"cluster: stop instances: {e}", file=sys.stderr)
        try:
            _run_parallel({m.name: (lambda m=m: m.stop(timeout=10)) for m in self.members})
        except BaseException as e:
            print(f"cluster: stop: {e}", file=sys.stderr)
        try:
            unmount_under(self.root)
        except BaseException as e:
            print(f"cluster: unmount: {e}", file=sys.stderr)
        if self._owns_root and not mounts_under(self.root):
            shutil.rmtree(self.root, ignore_errors=True)
        self.timings["stop"] = time.monotonic() - t0

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- up / down records
    def write_records(self) -> None:
        data = {"kind": self.kind, "root": str(self.root),
                "members": {m.name: m.to_json() for m in self.members}, "env": self.env_vars()}
        (self.root / "cluster.json").write_text(json.dumps(data, indent=2) + "\n")
        lines = ["# corral cluster lab: source this file to point lxc/incus/corral at it",
                 "unset INCUS_DIR INCUS_SOCKET LXD_SOCKET LXD_PROJECT INCUS_PROJECT LXD_DIR"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.env_vars().items()]
        (self.root / "env.sh").write_text("\n".join(lines) + "\n")

    @classmethod
    def from_records(cls, root: Path) -> Cluster:
        data = json.loads((Path(root) / "cluster.json").read_text())
        clu = cls(data["kind"], Path(data["root"]), size=len(data["members"]))
        for i, name in enumerate(data["members"]):
            d = Daemon.from_json(data["members"][name])
            m = clu.members[i]
            m.pid, m.https_address, m.fingerprint, m.cert_pem, m._set_up = (
                d.pid or _running_pid(m), d.https_address, d.fingerprint, d.cert_pem, True)
        return clu


def _running_pid(member: ClusterMember) -> int | None:
    """The pid of the daemon serving ``member``'s dir (it was restarted since the records
    were written), or None."""
    marker = f"{member.dir_var}={member.dir}".encode()
    for pid in _all_pids():
        argv = _read_proc(pid, "cmdline").split(b"\0")
        # the daemon itself (not its fork helpers or the LXC monitors it spawned)
        if len(argv) >= 2 and os.path.basename(argv[0]) in (b"lxd", b"incusd") \
                and argv[1] == b"--group" and marker in _read_proc(pid, "environ").split(b"\0"):
            return pid
    return None


def populate(cluster: Cluster, per_member: int, running: int, prefix: str = "b") -> float:
    """Create per_member stopped instances on every member (plus `running` started ones in all);
    returns the seconds it took. Used by the benchmark; instances are plain `init`s."""
    t0 = time.monotonic()
    jobs = {}
    for m in cluster.members:
        names = [f"{prefix}-{m.name}-{i:03d}" for i in range(per_member)]

        def run(m=m, names=names):
            for n in names:
                m.cli("init", IMAGE_ALIAS, n, "--target", m.name)
        jobs[m.name] = run
    Lab._raise(_run_parallel(jobs))
    started = []
    for i in range(running):
        m = cluster.members[i % len(cluster.members)]
        started.append(f"{prefix}-{m.name}-{i // len(cluster.members):03d}")
    if started:
        cluster.cli("start", *started, timeout=600)
    return time.monotonic() - t0


def cmd_up(root: Path, kind: str) -> int:
    """``lab.py up --cluster lxd --root DIR``: form a cluster and leave it running."""
    root = root.absolute()
    if (root / "cluster.json").exists():
        old = Cluster.from_records(root)
        if any(m.alive() for m in old.members):
            print(f"lab: {root} holds a running cluster; run `down` first", file=sys.stderr)
            return 1
        old.stop()
    if root.exists() and any(root.iterdir()):
        Cluster(kind, root).stop()  # what a failed start left: daemons, mounts
        shutil.rmtree(root)
    clu = Cluster(kind, root)
    try:
        clu.start()
    except LabError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 1
    clu.write_records()
    for m in clu.members:
        print(f"{m.name}: {m.kind} pid={m.pid} {m.url} dir={m.dir}")
    print(f"cluster formed in {clu.timings['formed']:.1f}s, ready in {clu.timings['total']:.1f}s;"
          f" remote '{CLUSTER_REMOTE}'; `source {root / 'env.sh'}`")
    return 0


def cmd_down(root: Path) -> int:
    clu = Cluster.from_records(root.absolute())
    t0 = time.monotonic()
    clu.stop()
    print(f"cluster stopped in {time.monotonic() - t0:.1f}s")
    return 0
