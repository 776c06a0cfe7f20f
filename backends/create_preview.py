"""The launch wizard's look at a source before it creates anything: for a
:class:`~backends.create_models.CreateSource` with ``preview`` set (a foreign VM to import, say),
:meth:`PreviewVerbs.preview_source` reads what the user named and says what it
understood, what it cannot carry over and why it could not be made at all, in words, with
suggested values for the wizard's fields. A base of :class:`~backends.base.Backend`; the
default raises :class:`~backends.errors.Unsupported`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .errors import Unsupported
from .create_models import CreateSource


@dataclass(frozen=True, slots=True)
class SourcePreview:
    """What the summary shows of a source, before anything is written."""

    lines: tuple[str, ...] = ()
    """What was understood and what not, one line each (text from the source: shown
    through the UI's text gate)."""
    problems: tuple[str, ...] = ()
    """Why it cannot be created from (empty: it can)."""
    defaults: Mapping[str, str] = field(default_factory=dict)
    """Values the wizard's fields take from the source: ``name``, ``cpus``, ``memory``."""


class PreviewVerbs:
    """The preview part of the backend contract."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""

    async def preview_source(self, source: CreateSource,
                             progress: Callable[[str], None] | None = None) -> SourcePreview:
        """Read ``source`` (``value``: the path typed) for the summary. May take a while
        (an archive unpacked and checked; ``progress`` receives short texts) and is
        cancelled by cancelling the awaiting task; what it reads is kept for the
        ``create_instance`` that follows, and dropped by :meth:`drop_preview`.

        Raises:
            InvalidInput: the path is not something this source reads (in words).
        """
        raise self._unsupported("preview a source")

    def drop_preview(self, source: CreateSource) -> None:
        """Forget what :meth:`preview_source` kept for ``source`` (the wizard left)."""
