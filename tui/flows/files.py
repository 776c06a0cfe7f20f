"""The file panel of an instance (``f``): ``tui/screens/files.py`` does the browsing."""

from __future__ import annotations

from backends.errors import BackendError

from .context import Context


async def browse(ctx: Context) -> None:
    from ..screens.files import FilesScreen

    assert ctx.ref is not None
    try:
        backend = ctx.backend
    except BackendError as e:
        ctx.fail(e, f"Files of {ctx.ref}")
        return
    ctx.show(FilesScreen(backend, ctx.ref))
