"""cloud-init user-data: the one check of what a launch may pass as ``user-data``.

cloud-init recognises user-data by its first line: ``#cloud-config`` (a YAML mapping),
``#!`` (a script run once), ``#include`` / ``#include-once`` (URLs to fetch),
``#cloud-boothook``, ``#part-handler``, ``#cloud-config-archive``, ``## template: jinja``
(a Jinja template whose rendered text is one of the others), and MIME multipart archives
(``Content-Type: multipart/``). Anything else is ignored by cloud-init, so corral refuses it
rather than launching an instance whose set-up silently never happens.
"""

from __future__ import annotations

import yaml

_HEADERS = ("#cloud-config-archive", "#cloud-config", "#cloud-boothook", "#part-handler",
            "#include-once", "#include", "#!")
_EXAMPLE = "#cloud-config, #!/bin/sh, #include or ## template: jinja"


def user_data_problem(text: str) -> str | None:
    """Why cloud-init would not use ``text`` as user-data, in words; None when it would
    (empty text is fine: nothing is sent)."""
    if not text.strip():
        return None
    lines = text.lstrip("\ufeff").lstrip().splitlines()
    first = lines[0].strip()
    body = "\n".join(lines[1:])
    if first.lower().replace(" ", "") == "##template:jinja":
        rest = body.lstrip()
        if not rest:
            return "The Jinja template is empty."
        second = rest.splitlines()[0].strip()
        if second.startswith("{") or any(second.startswith(h) for h in _HEADERS):
            return None  # its YAML is only YAML once rendered: the header is what we can check
        return ("After '## template: jinja' the template must start with a line cloud-init "
                f"knows (#cloud-config, #!…); it is '{second[:40]}'.")
    if first.lower().startswith("content-type:") and "multipart/" in first.lower():
        return None
    header = next((h for h in _HEADERS if first.startswith(h)), None)
    if header is None:
        return (f"User data must start with a line cloud-init knows ({_EXAMPLE}); "
                f"the first line is '{first[:40]}'.")
    if header == "#!" and len(first) <= 2:
        return "The script's first line must name its interpreter (e.g. #!/bin/sh)."
    if header == "#cloud-config":
        if first != "#cloud-config":
            return f"The first line must be exactly '#cloud-config' (it is '{first[:40]}')."
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            return f"Not valid YAML{where}: {getattr(e, 'problem', None) or e}"
        if data is not None and not isinstance(data, dict):
            return "The cloud-config must be a YAML mapping (keys like 'packages:', 'runcmd:')."
    if header == "#cloud-config-archive":
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            return f"The cloud-config archive is not valid YAML: {e}."
        if data is not None and not isinstance(data, list):
            return "A cloud-config archive must be a YAML list of parts."
    if header in ("#include", "#include-once"):
        urls = [u.strip() for u in body.splitlines() if u.strip() and not u.startswith("#")]
        if not urls:
            return f"'{header}' must be followed by at least one URL, one per line."
    return None
