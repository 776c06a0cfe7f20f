"""The remotes reader on the files the real `lxc remote add` / `incus remote add` wrote
(with trust tokens) in the lab's temp HOME."""

from __future__ import annotations

from pathlib import Path

import yaml

from backends.remotes import discover


def test_real_cli_configs_give_every_remote_with_its_certificates(lab, lab_env, fake_host):
    found = discover(lab_env)
    by = {r.name: r for r in found.remotes}
    assert set(by) == {"local", "lab2", "inc1", "incus-local"}
    assert found.problems == []

    assert by["local"].kind == "lxd"
    assert by["local"].socket_path == str(lab.lxd1.socket)

    lab2 = by["lab2"]
    assert lab2.kind == "lxd"
    assert lab2.address == f"https://{lab.lxd2.https_address}"
    assert lab2.client_cert == str(lab.lxd_conf / "client.crt")
    assert lab2.client_key == str(lab.lxd_conf / "client.key")
    assert lab2.server_cert == str(lab.lxd_conf / "servercerts" / "lab2.crt")
    assert Path(lab2.server_cert).read_text().strip() == lab.lxd2.cert_pem.strip()

    inc1 = by["inc1"]
    assert inc1.kind == "incus" and inc1.address == f"https://{lab.incus1.https_address}"
    assert inc1.server_cert == str(lab.incus_conf / "servercerts" / "inc1.crt")
    assert inc1.client_cert and Path(inc1.client_cert).exists()

    # the incus CLI's built-in local remote, renamed beside LXD's, at the default socket
    # (the system path, which the suite's fake host moves under a temp dir)
    assert by["incus-local"].socket_path == fake_host.path("/var/lib/incus/unix.socket").as_posix()

    # the files are exactly as the CLIs wrote them, and corral wrote nothing
    lxc_yaml = yaml.safe_load((lab.lxd_conf / "config.yml").read_text())
    assert lxc_yaml["remotes"]["lab2"]["protocol"] == "lxd"
    incus_yaml = yaml.safe_load((lab.incus_conf / "config.yml").read_text())
    assert incus_yaml["remotes"]["inc1"]["protocol"] == "incus"


def test_reader_never_writes_the_cli_files(lab, lab_env):
    before = {p: p.stat().st_mtime_ns for d in (lab.lxd_conf, lab.incus_conf)
              for p in d.rglob("*") if p.is_file()}
    discover(lab_env)
    after = {p: p.stat().st_mtime_ns for d in (lab.lxd_conf, lab.incus_conf)
             for p in d.rglob("*") if p.is_file()}
    assert before == after
