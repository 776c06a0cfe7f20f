"""What a graphical screen session offers the UI (``Backend.open_display``): the screen
as a Pillow image, the region that changed, and input going back as X keysyms and
absolute pointer positions."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class ScreenSink(Protocol):
    """Where a graphical screen session reports changes."""

    def frame(self, x: int, y: int, width: int, height: int) -> None:
        """This region of ``session.image`` changed (all of it after a resize)."""

    def closed(self, reason: str) -> None: ...


@runtime_checkable
class ScreenSession(Protocol):
    """One attached graphical screen: ``image`` (a Pillow RGB image, None before the first
    frame), keys as X keysyms, an absolute pointer, special chords, PNG screenshots."""

    title: str
    special_keys: tuple[str, ...]
    vnc_path: str
    image: object

    async def start(self, sink: ScreenSink) -> None: ...

    async def key(self, keysym: int, down: bool) -> None: ...

    async def keys(self, events: list[tuple[int, bool]]) -> None: ...

    async def pointer(self, x: int, y: int, buttons: int = 0) -> None: ...

    async def send_special(self, name: str) -> None: ...

    async def set_fps(self, fps: float) -> None: ...

    async def refresh(self) -> None: ...

    def screenshot(self, path: str) -> object: ...

    async def close(self) -> None: ...
