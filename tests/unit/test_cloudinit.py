"""The one cloud-init user-data check (``backends.cloudinit.user_data_problem``): what
cloud-init would act on is accepted; what it would silently ignore is refused in words."""

from __future__ import annotations

import pytest

from backends.cloudinit import user_data_problem

MULTIPART = """\
Content-Type: multipart/mixed; boundary="===============corral=="
MIME-Version: 1.0

--===============corral==
Content-Type: text/cloud-config; charset="us-ascii"

#cloud-config
packages: [htop]

--===============corral==
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/sh
echo hello
--===============corral==--
"""


# What cloud-init acts on (or, for nothing at all, what it needs no data for), by kind.
ACCEPTED = {
    "cloud-config": [
        "#cloud-config\npackages:\n  - htop\nruncmd:\n  - [touch, /tmp/x]\n",
        "#cloud-config\n",  # an empty mapping: nothing to do, but valid
        "#cloud-config\n# only a comment\n",
        "\ufeff#cloud-config\nhostname: web\n",  # a byte-order mark from an editor
        "\n\n#cloud-config\nhostname: web\n",  # leading blank lines
        "#cloud-config\r\nhostname: web\r\n",  # Windows line ends
        "#cloud-config\nusers:\n  - name: alice\n    groups: [sudo]\n"
        "    ssh_authorized_keys: ['ssh-ed25519 AAAA alice']\n",
    ],
    "script": [
        "#!/bin/sh\necho hello\n",
        "#!/bin/bash\nset -e\napt-get update\n",
        "#!/usr/bin/env python3\nprint('hi')\n",
        "#! /bin/sh\necho spaced\n",
    ],
    "include": [
        "#include\nhttps://example.com/user-data.yaml\n",
        "#include\nhttps://example.com/a\nhttp://example.com/b\n",
        "#include-once\nhttps://example.com/once\n",
        "#include\n# a comment line\nhttps://example.com/a\n",
    ],
    "jinja": [
        "## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n",
        "## template: jinja\n#!/bin/sh\necho {{ ds.meta_data.instance_id }}\n",
        "## template:jinja\n#cloud-config\nruncmd:\n  - echo {{ v1.region }}\n",
        # the YAML is only YAML once rendered: braces are fine here
        "## template: jinja\n#cloud-config\n{% if v1.region %}region: {{ v1.region }}{% endif %}\n",
        "## template: jinja\n{% set x = 1 %}\n#cloud-config\n",
    ],
    "multipart": [MULTIPART, MULTIPART.replace("multipart/mixed", "multipart/alternative")],
    "other-kind": [
        "#cloud-boothook\n#!/bin/sh\necho early\n",
        "#part-handler\ndef list_types(): return []\n",
        "#cloud-config-archive\n- type: text/cloud-config\n  content: 'hostname: x'\n",
    ],
    "nothing": ["", "   ", "\n\n", " \t\n"],
}


@pytest.mark.parametrize("text", [pytest.param(text, id=f"{kind}-{i}")
                                  for kind, texts in ACCEPTED.items()
                                  for i, text in enumerate(texts)])
def test_what_cloud_init_acts_on_is_accepted(text):
    assert user_data_problem(text) is None


@pytest.mark.parametrize("text", ["#!\necho hi\n", "#!  \necho hi\n", "#!"])
def test_a_script_without_its_interpreter_is_refused(text):
    problem = user_data_problem(text)
    assert problem and "interpreter" in problem and "#!/bin/sh" in problem


@pytest.mark.parametrize("text, kind", [
    ("#cloud-config\n- one\n- two\n", "list"),
    ("#cloud-config\njust words\n", "string"),
    ("#cloud-config\n42\n", "number"),
])
def test_cloud_config_that_is_not_a_mapping_is_refused(text, kind):
    problem = user_data_problem(text)
    assert problem and "mapping" in problem, (kind, problem)


def test_invalid_yaml_is_refused_naming_the_line():
    text = "#cloud-config\npackages:\n  - htop\nruncmd: [unclosed\nhostname: x\n"
    problem = user_data_problem(text)
    assert problem and "not valid yaml" in problem.lower()
    assert "line 5" in problem, problem  # where the parser found the open bracket unclosed


def test_invalid_yaml_line_number_counts_the_header():
    problem = user_data_problem("#cloud-config\nkey: value\n\tbad: tab\n")
    assert problem and "not valid yaml" in problem.lower() and "line 3" in problem, problem


@pytest.mark.parametrize("first", [
    "packages: [htop]",  # YAML without the header: cloud-init ignores it
    "# cloud-config",  # a space: not the header
    "#cloudconfig",
    "hello",
    "echo hello",
    "{\"packages\": [\"htop\"]}",
    "## template: mustache",
    "Content-Type: text/plain",
])
def test_unknown_first_lines_are_refused_naming_them(first):
    problem = user_data_problem(first + "\nmore\n")
    assert problem, first
    assert "first line" in problem or "must start" in problem, problem
    assert first[:40] in problem, problem


def test_cloud_config_header_must_be_exact():
    problem = user_data_problem("#cloud-config: yes\nhostname: x\n")
    assert problem and "#cloud-config" in problem and "exactly" in problem, problem


def test_include_without_urls_is_refused():
    for header in ("#include", "#include-once"):
        problem = user_data_problem(f"{header}\n\n# only comments\n")
        assert problem and header in problem and "URL" in problem, problem


def test_empty_jinja_template_and_unknown_template_body_are_refused():
    problem = user_data_problem("## template: jinja\n\n")
    assert problem and "empty" in problem, problem
    problem = user_data_problem("## template: jinja\nhostname: x\n")
    assert problem and "#cloud-config" in problem and "hostname: x" in problem, problem


def test_bad_cloud_config_archive_is_refused():
    problem = user_data_problem("#cloud-config-archive\nkey: value\n")
    assert problem and "list" in problem, problem
    problem = user_data_problem("#cloud-config-archive\n- [unclosed\n")
    assert problem and "not valid yaml" in problem.lower(), problem

