from tui.config import load_config


def test_missing_file_gives_defaults(tmp_path):
    cfg = load_config(tmp_path / "nope.toml")
    assert cfg.theme == "corral-dark" and cfg.problems == ()


def test_settings_keymap_and_remotes_are_read(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[ui]\ntheme = "corral-light"\nstop_timeout = 5\nnetwork_timeout = 2.5\n'
        '[keymap]\n"instance.stop" = "x"\n'
        '[remotes]\nhide = ["junk"]\nread_only = ["prod"]\n'
        '[[remote]]\nname = "lab"\nkind = "incus"\naddress = "https://127.0.0.1:1"\n'
    )
    cfg = load_config(path)
    assert (cfg.theme, cfg.stop_timeout, cfg.network_timeout) == ("corral-light", 5, 2.5)
    assert cfg.keymap == {"instance.stop": "x"}
    assert cfg.hide_remotes == ("junk",) and cfg.read_only_remotes == ("prod",)
    assert cfg.remotes[0]["name"] == "lab"


def test_broken_toml_names_the_file_and_keeps_defaults(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[ui\ntheme = 1\n")
    cfg = load_config(path)
    assert cfg.theme == "corral-dark"
    assert len(cfg.problems) == 1 and str(path) in cfg.problems[0]
    assert "not valid TOML" in cfg.problems[0]


def test_bad_number_is_reported_and_defaulted(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[ui]\nstop_timeout = "soon"\n')
    cfg = load_config(path)
    assert cfg.stop_timeout == 30
    assert "stop_timeout" in cfg.problems[0]


def test_wrong_shapes_are_reported_not_crashed(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('keymap = "x"\nui = 3\n[remotes]\nhide = "prod"\n'
                    '[[lxc.paths]]\n')
    cfg = load_config(path)
    assert cfg.hide_remotes == ("prod",)
    assert any("[keymap] must be a table" in p for p in cfg.problems)
    assert any("[ui] must be a table" in p for p in cfg.problems)


def test_plural_remote_tables_are_explained(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[[remotes]]\nname = "x"\n')
    cfg = load_config(path)
    assert any("[[remote]] tables (singular)" in p for p in cfg.problems)


def test_a_missing_list_is_no_problem(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[remotes]\nhide = ["lab2"]\n[lxc]\nenabled = true\n')
    cfg = load_config(path)
    assert cfg.problems == ()
    assert cfg.hide_remotes == ("lab2",) and cfg.read_only_remotes == () and cfg.lxc_paths == ()
