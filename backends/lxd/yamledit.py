"""Any object of an LXD/Incus remote as YAML, read with its ETag and written back with
``If-Match`` (what ``lxc config edit`` / ``lxc profile edit`` do, guarded against a change
made meanwhile). Nothing is sent when the text is not YAML."""

from __future__ import annotations

from typing import Any

import yaml

from ..base import Backend
from ..errors import InvalidInput, OperationFailed
from ..models import ResourceKind
from .lazy import pylxd_exc
from .objects import EDITABLE, WORDS, node, refusal
from .ops import Ops
from .rest import Rest


def dump(data: dict[str, Any], kind: ResourceKind) -> str:
    """The editable fields of ``data`` as block YAML, in a stable order."""
    fields = {k: data.get(k) for k in EDITABLE[kind] if k in data}
    for key in ("config", "devices"):
        if key in fields and fields[key] is None:
            fields[key] = {}
    return yaml.safe_dump(fields, default_flow_style=False, sort_keys=True,
                          allow_unicode=True)


def load(text: str, kind: ResourceKind) -> dict[str, Any]:
    """The YAML the user wrote, checked; InvalidInput names the line of a mistake."""
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise InvalidInput(f"Not valid YAML: {where}{e.problem or e.context}.",
                           title="Invalid YAML") from None
    except yaml.YAMLError as e:
        raise InvalidInput(f"Not valid YAML: {e}.", title="Invalid YAML") from None
    if not isinstance(data, dict):
        raise InvalidInput("The text must be a mapping of keys (config:, description:, …).",
                           title="Invalid YAML")
    unknown = sorted(set(data) - set(EDITABLE[kind]))
    if unknown:
        raise InvalidInput(f"Unknown key(s) {', '.join(unknown)}; a {WORDS[kind]} has "
                           f"{', '.join(EDITABLE[kind])}.", title="Invalid YAML")
    for key in ("config", "devices"):
        if key in data and data[key] is not None and not isinstance(data[key], dict):
            raise InvalidInput(f"'{key}' must be a mapping.", title="Invalid YAML")
    config = data.get("config")
    if isinstance(config, dict):
        data["config"] = {str(k): v if isinstance(v, str) else
                          (str(v).lower() if isinstance(v, bool) else str(v))
                          for k, v in config.items() if v is not None}
    return data


class YamlEdit(Backend):
    """``get_yaml``/``put_yaml`` of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    async def get_yaml(self, kind: ResourceKind, name: str, parent: str = ""
                       ) -> tuple[str, str]:
        if kind not in EDITABLE:
            raise InvalidInput(f"A {WORDS.get(kind, kind.value)} cannot be edited as YAML.")
        rest = self.rest
        what = f"{WORDS[kind]} {parent + '/' if parent else ''}{name}"

        def _do() -> tuple[str, str]:
            try:
                r = node(rest, kind, name, parent).get()
            except pylxd_exc.LXDAPIException as e:
                raise refusal(e, what) from e
            return dump(r.json()["metadata"], kind), r.headers.get("ETag", "")

        return await rest.call(_do)

    async def put_yaml(self, kind: ResourceKind, name: str, text: str, etag: str,
                       parent: str = "") -> None:
        if kind not in EDITABLE:
            raise InvalidInput(f"A {WORDS.get(kind, kind.value)} cannot be edited as YAML.")
        body = load(text, kind)
        rest = self.rest
        what = f"{WORDS[kind]} {parent + '/' if parent else ''}{name}"

        def _do() -> None:
            headers = {"If-Match": etag} if etag else {}
            try:
                response = node(rest, kind, name, parent).put(json=body, headers=headers)
                self.ops.wait(response, 120)
            except pylxd_exc.LXDAPIException as e:
                error = refusal(e, what)
                if isinstance(error, OperationFailed):  # a value the daemon refused
                    raise InvalidInput(error.message, title="Refused") from e
                raise error from e

        await rest.call(_do, timeout=150)
