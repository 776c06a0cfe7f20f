"""The lxc/incus CLI config reader on hand-written files (the files real ``lxc remote add``
writes are checked in tests/backends/test_lab_configs.py)."""

from pathlib import Path

from backends.remotes import discover, incus_socket_path, lxd_socket_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home/.config"),
           "LXD_GLOBAL_CONF": str(tmp_path / "etc-lxd"),
           "INCUS_GLOBAL_CONF": str(tmp_path / "etc-incus")}
    env.update(extra)
    return env


LXD_CONFIG = """\
default-remote: local
remotes:
  images:
    addr: https://images.lxd.canonical.com
    protocol: simplestreams
    public: true
  local:
    addr: unix://
    public: false
  prod:
    addr: https://192.0.2.4:8443
    auth_type: tls
    project: web
    protocol: lxd
    public: false
aliases: {}
"""


def test_lxd_config_remotes_certs_and_project(tmp_path):
    conf = tmp_path / "home/.config/lxc"
    write(conf / "config.yml", LXD_CONFIG)
    write(conf / "client.crt", "x")
    write(conf / "client.key", "x")
    write(conf / "servercerts/prod.crt", "x")
    found = discover(env_for(tmp_path, LXD_DIR="/srv/lxd"))
    by = {r.name: r for r in found.remotes}
    assert set(by) == {"local", "prod"}
    assert by["local"].address == "unix:///srv/lxd/unix.socket"
    prod = by["prod"]
    assert prod.kind == "lxd" and prod.project == "web"
    assert prod.client_cert == str(conf / "client.crt")
    assert prod.server_cert == str(conf / "servercerts/prod.crt")
    assert [s.name for s in found.image_sources] == ["images"]
    assert found.problems == []


def test_lxd_conf_env_wins_and_snap_path_is_read(tmp_path):
    snap = tmp_path / "home/snap/lxd/common/config"
    write(snap / "config.yml", "remotes:\n  snapped:\n    addr: https://h:8443\n")
    found = discover(env_for(tmp_path))
    assert "snapped" in {r.name for r in found.remotes}
    other = tmp_path / "elsewhere"
    write(other / "config.yml", "remotes:\n  mine:\n    addr: https://m:8443\n")
    found = discover(env_for(tmp_path, LXD_CONF=str(other)))
    names = {r.name for r in found.remotes}
    assert "mine" in names and "snapped" not in names


def test_malformed_file_is_named_and_other_remotes_still_load(tmp_path):
    write(tmp_path / "home/.config/lxc/config.yml", "remotes:\n  bad: [unclosed\n")
    write(tmp_path / "home/.config/incus/config.yml",
          "remotes:\n  inc:\n    addr: https://i:8443\n    protocol: incus\n")
    found = discover(env_for(tmp_path))
    assert "inc" in {r.name for r in found.remotes}
    assert len(found.problems) == 1
    problem = str(found.problems[0])
    assert str(tmp_path / "home/.config/lxc/config.yml") in problem
    assert "not valid YAML" in problem and "line" in problem


def test_wrong_shape_is_reported(tmp_path):
    write(tmp_path / "home/.config/lxc/config.yml", "- just\n- a list\n")
    found = discover(env_for(tmp_path))
    assert "should be a mapping" in str(found.problems[0])


def test_incus_per_remote_client_certs_failover_and_name_clash(tmp_path):
    conf = tmp_path / "home/.config/incus"
    write(conf / "config.yml",
          "remotes:\n  prod:\n    addr: https://a:8443,https://b:8443\n    protocol: incus\n"
          "  oci:\n    addr: https://docker.io\n    protocol: oci\n    public: true\n")
    write(conf / "client.crt", "x")
    write(conf / "client.key", "x")
    write(conf / "clientcerts/prod.crt", "x")
    write(conf / "clientcerts/prod.key", "x")
    write(tmp_path / "home/.config/lxc/config.yml",
          "remotes:\n  prod:\n    addr: https://lxd:8443\n")
    found = discover(env_for(tmp_path, INCUS_SOCKET="/run/x/incus.sock"))
    by = {r.name: r for r in found.remotes}
    assert by["prod"].kind == "lxd"
    inc = by["incus-prod"]
    assert inc.kind == "incus" and inc.addresses == ("https://a:8443", "https://b:8443")
    assert inc.client_cert == str(conf / "clientcerts/prod.crt")
    assert by["incus-local"].address == "unix:///run/x/incus.sock"
    assert "oci" not in by


def test_global_config_is_merged_but_user_wins(tmp_path):
    write(tmp_path / "etc-lxd/config.yml",
          "remotes:\n  shared:\n    addr: https://s:8443\n  prod:\n    addr: https://g:8443\n")
    write(tmp_path / "etc-lxd/servercerts/shared.crt", "x")
    write(tmp_path / "home/.config/lxc/config.yml",
          "remotes:\n  prod:\n    addr: https://u:8443\n")
    found = discover(env_for(tmp_path))
    by = {r.name: r for r in found.remotes}
    assert by["prod"].address == "https://u:8443"
    assert by["shared"].server_cert == str(tmp_path / "etc-lxd/servercerts/shared.crt")


def test_no_cli_config_and_no_socket_means_no_local_remote(tmp_path):
    env = env_for(tmp_path, LXD_SOCKET=str(tmp_path / "none.sock"),
                  INCUS_SOCKET=str(tmp_path / "none2.sock"))
    assert discover(env).remotes == []


def test_socket_lookup_order():
    assert lxd_socket_path({"LXD_SOCKET": "/a", "LXD_DIR": "/b"}) == "/a"
    assert lxd_socket_path({"LXD_DIR": "/b"}) == "/b/unix.socket"
    assert incus_socket_path({"INCUS_SOCKET": "/a", "INCUS_DIR": "/b"}) == "/a"
    assert incus_socket_path({"INCUS_DIR": "/b"}) == "/b/unix.socket"


def test_corral_config_remotes_hidden_and_read_only(tmp_path):
    write(tmp_path / "home/.config/lxc/config.yml", LXD_CONFIG)
    found = discover(
        env_for(tmp_path, LXD_DIR="/srv/lxd"),
        extra=[{"name": "lab", "kind": "incus", "address": "/run/lab.sock"},
               {"name": "broken", "kind": "docker", "address": "x"}],
        extra_source="/cfg.toml", read_only=["lab"], hidden=["prod"],
    )
    by = {r.name: r for r in found.remotes}
    assert set(by) == {"local", "lab"}
    assert by["lab"].address == "unix:///run/lab.sock" and by["lab"].read_only
    assert any("unknown kind 'docker'" in str(p) for p in found.problems)


def test_oidc_remote_is_listed_with_its_problem(tmp_path):
    write(tmp_path / "home/.config/lxc/config.yml",
          "remotes:\n  sso:\n    addr: https://s:8443\n    auth_type: oidc\n")
    by = {r.name: r for r in discover(env_for(tmp_path)).remotes}
    assert "oidc" in by["sso"].problem
