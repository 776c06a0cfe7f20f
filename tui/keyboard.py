"""Every key, in order, where it would have gone had the UI been instant.

Textual hands a key to the widget focused *when the app takes the key from its queue*,
and the consequences of the key before it arrive later: a binding runs only once the key
has bubbled up to the app through each widget's own queue, ``focus()`` is itself a
message, a pushed screen focuses its first widget on a later message, and a flow that
opens a dialog or a console runs in a worker. So in a burst (a fast typist, a paste,
``tmux send-keys '/web' Enter``) every key after ``/`` reached the instance table — and ran
its verbs — before the filter box had the focus.

:class:`KeyGate` closes the whole family: the app gives it every key first, and it hands
Textual one key at a time. After each key it waits until the key's consequences have
settled (every message queue of the app and its screen has run what was queued, the focus
and the screen stack stopped changing), and while a flow the key started is opening what
it opens (a dialog, a wizard, a console tab: a *hold*, :meth:`KeyGate.hold`). Only then
does the next key go, to whatever now has the focus. Keys typed before the UI is ready
(:meth:`KeyGate.open`) wait in the queue as well. A hold that ends with nothing opened
(the flow failed, or said why not) does not pass its keys on to the table: they are
dropped and the user is told how many, never turned into commands. The same goes for a key
bound to something that opens (an :class:`Opens` node says which) that is refused before any
flow starts — greyed, not offered, nothing selected: the text typed after ``e`` on a stopped
instance is never run on the table.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from textual import events

from . import _textual_compat as compat

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

log = logging.getLogger(__name__)

SETTLE_ROUNDS = 12
"""At most this many passes over the app's message queues after a key (each pass lets
every queue run what was in it; the consequences of a key take two or three)."""
BARRIER_TIMEOUT = 1.0
"""A queue still busy after this long (a handler waiting on something slow) is not waited
for any longer in that pass."""
HOLD_LIMIT = 120.0
"""The longest a flow may hold the keys typed after its key while it opens."""
SEARCH_LIMIT = 10.0
"""The longest a key waits for the command palette's search of the text typed before it."""
HOLD_POLL = 0.02
"""How often a hold looks whether its flow opened something (only while one is held)."""

_RELEASED = "_corral_released"


class Opens:
    """A node some of whose key bindings open something the keys typed after them belong to
    (a dialog, a menu, a console). When such a key opens nothing — no flow held the keys,
    neither the screen nor the focus changed — the keys typed after it in the same burst are
    dropped, in words."""

    def opens(self, action: str) -> str | None:
        """What binding action ``action`` of this node opens, in words ("Shell c1"); None:
        nothing (a key whose keys after it are the table's as usual)."""
        return None


class KeyGate:
    """The app's keys, one at a time, each after the one before has settled.

    The app calls :meth:`admit` for every key the terminal sends, handles it only when
    told to, then calls :meth:`dispatched`. ``notify`` tells the user about dropped keys.
    """

    def __init__(self, app: "App", notify: Callable[[str], None] | None = None) -> None:
        self._app = app
        self._notify = notify
        self._queue: deque[events.Key | events.Paste] = deque()
        self._open = False
        self._busy = False
        self._holds: list[_Hold] = []
        self._watched: tuple[str, tuple[object, ...], int] | None = None
        """(what, where, holds) of the key just released when it is bound to something
        that opens: its keys are dropped if it opened nothing."""
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Keys typed for something that did not open (told to the user)."""
        self.typed_ahead = asyncio.Event()
        """Set once the keys typed before :meth:`open` are handled (or wait for what a
        flow of theirs opens): the remotes connect after them, not in their way."""

    # The app's side ---------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued, settling or held: a key now is handled at once."""
        return self._open and not self._busy and not self._queue and not self._holds

    def admit(self, event: events.Key | events.Paste) -> bool:
        """True: the app handles ``event`` now. False: it waits its turn (the gate posts
        it to the app again when it is due)."""
        if getattr(event, _RELEASED, False) or self._quits(event):
            return True
        if self.idle:
            self._busy = True
            self._watch(event)
            return True
        self._queue.append(event)
        return False

    def unalt(self, event: events.Key | events.Paste) -> list[events.Key | events.Paste]:
        """The keys ``event`` stands for. A terminal sends Alt+N as Esc N, so Esc then N
        typed fast (closing a dialog, then a new instance) arrive in one read as Alt+N, and
        Textual names them so. Where nothing binds that Alt key and no console has the
        focus (a console passes Alt+N on as the same Esc N), it is the two keys the user
        typed: Esc, then N, each through the gate like any other key."""
        if not isinstance(event, events.Key) or getattr(event, _RELEASED, False):
            return [event]
        key, char = event.key, event.character
        if not key.startswith("alt+") or not char or len(char) != 1 or not char.isprintable():
            return [event]
        from .widgets.view_messages import ConsoleView

        if isinstance(self._app.focused, ConsoleView) or self._bound(key):
            return [event]
        # The key as Textual's parser names it when it comes alone: the name after "alt+"
        # (":" is "colon", "/" "slash"), an upper-case letter by itself ("N", not
        # "shift+n").
        name = key[len("alt+"):]
        if name.startswith("shift+") and char.isupper():
            name = char
        escape, rest = events.Key("escape", "\x1b"), events.Key(name, char)
        for part in (escape, rest):
            part.set_sender(self._app)
        return [escape, rest]

    def _bound(self, key: str) -> bool:
        """A binding of the focused widget, its ancestors, the screen or the app names
        ``key``."""
        try:
            chain = compat.binding_chain(self._app)
        except Exception:  # (no screen yet): nothing is bound
            return False
        return any(key in bindings.key_to_bindings for _node, bindings in chain)

    def _watch(self, event: events.Key | events.Paste) -> None:
        """Before ``event`` is handled: when it is a key bound to something that opens
        (:class:`Opens`), what the UI is now, to see whether it opened anything."""
        self._watched = None
        if not isinstance(event, events.Key) or self._typed_text(event):
            return
        what = self._opener(event.key)
        if what is not None:
            self._watched = (what, self._where(), len(self._holds))

    def _opener(self, key: str) -> str | None:
        """What the binding of ``key`` that Textual would run opens (the first in the
        binding chain; a priority one before any other)."""
        try:
            chain = compat.binding_chain(self._app)
        except Exception:  # (no screen yet): nothing is bound
            return None
        found = [(node, b) for node, bindings in chain
                 for b in bindings.key_to_bindings.get(key, ())]
        found.sort(key=lambda pair: not pair[1].priority)  # (stable: chain order kept)
        if not found:
            return None
        node, binding = found[0]
        namespace, _, action = binding.action.rpartition(".")
        target: object = {"screen": self._app.screen, "app": self._app}.get(namespace, node)
        return target.opens(action) if isinstance(target, Opens) else None

    def _refused(self) -> None:
        """After the watched key settled: it opened nothing and started no flow (refused
        before any: greyed, not offered, nothing selected): the keys typed after it are
        dropped, in words, not run on the table."""
        watched, self._watched = self._watched, None
        if watched is None or not self._queue:
            return
        what, where, holds = watched
        if len(self._holds) == holds and self._where() == where:
            self._drop(what)

    def _quits(self, event: events.Event) -> bool:
        """A key the app itself binds, with priority, to quitting (Ctrl+Q): never held
        behind a flow that waits for a remote, whatever the keys ahead of it."""
        if not isinstance(event, events.Key):
            return False
        try:
            bindings = compat.bindings_map(self._app).key_to_bindings.get(event.key, ())
        except AttributeError:  # (Textual's bindings map, by another name)
            return False
        return any(b.priority and b.action in ("quit", "app.quit") for b in bindings)

    def dispatched(self, event: events.Event | None = None) -> None:
        """The app has handled the key it was told to: settle, then the next one (at once
        after text typed into a text box or a console: that moves nothing)."""
        if event is not None and self._typed_text(event) and not self._queue \
                and not self._holds and (self._task is None or self._task.done()):
            self._busy = False
            return
        self._busy = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._pump())

    def _typed_text(self, event: events.Event) -> bool:
        """A printable key (or a paste) that the focused text box or console takes as
        text: it cannot move the focus nor open anything, so the next key needs no wait
        (a paste typed as keys would otherwise wait a settling per key)."""
        if isinstance(event, events.Key) and not event.is_printable:
            return False
        from textual.widgets import Input

        from .widgets.view_messages import ConsoleView

        kinds: tuple[type, ...] = (Input, ConsoleView)
        text_area = compat.loaded_text_area()  # none loaded: none focused
        if text_area is not None:
            kinds += (text_area,)
        return isinstance(self._app.focused, kinds)

    def open(self) -> None:
        """The UI is ready for keys (the main screen is up): those typed so far go now."""
        if self._open:
            return
        self._open = True
        if not self._queue:
            self.typed_ahead.set()  # nothing was typed: nothing to wait for
        self._busy = True
        self.dispatched()

    def hold(self, worker: "Worker[Any]", what: str) -> None:
        """A flow started by the key being handled opens something the keys after it
        belong to (``what``: "Delete c1", for the words if it opens nothing)."""
        app = self._app
        self._holds.append(_Hold(worker, what, app.screen, app.focused, len(app.screen_stack)))
        self.dispatched()

    def handed_over(self) -> None:
        """The flows being held gave the terminal to another program (an editor): that
        is what they opened. Keys typed while it runs are that program's (the terminal
        gives them to it); those typed once it has ended go on as usual, never dropped as
        if the flow had opened nothing. Those typed before it (in the burst of the key
        that opened it) reached neither it nor the app: dropped, in words — never run on
        the table below the editor."""
        for hold in self._holds:
            hold.external = True
        if self._holds and self._queue:
            self._drop(self._holds[0].what, "handed the terminal to another program")

    # Settling ---------------------------------------------------------------------------

    @property
    def _closing(self) -> bool:
        app = self._app
        return compat.is_closing(app)  # quitting: keys have nowhere to go

    async def _pump(self) -> None:
        try:
            settle = True
            while not self._closing:
                # after text typed into a text box, the next key goes at once if it is
                # text too; any other key waits for what the text did (a search of it)
                if settle or self._queue and not self._typed_text(self._queue[0]):
                    await self.settle()
                settle = True
                self._refused()
                if self._holds:
                    self.typed_ahead.set()  # (a held verb may wait for its remote)
                    await self._wait_holds()
                    continue
                if not self._queue:
                    if self._open:
                        self.typed_ahead.set()
                    break
                if await self._searched():
                    await self.settle()
                released = _again(self._queue.popleft(), self._app)
                text = self._typed_text(released)  # (the focus it goes to, now)
                self._watch(released)
                self._app.post_message(released)
                while text and self._queue and self._typed_text(self._queue[0]):
                    # the rest of a run of text typed into the same box goes with it, in
                    # order: it moves nothing, and the box (a filter) reacts once to the
                    # run instead of once per character behind a round trip each
                    released = _again(self._queue.popleft(), self._app)
                    self._app.post_message(released)
                # The app handles it and calls dispatched(); settle after it
                await self._handled(released)
                settle = not text  # text into a text box: the next key at once, in order
        except Exception:  # never leave the keyboard shut
            log.exception("key gate")
            self._queue.clear()
            self._holds.clear()
        finally:
            self._busy = False
            if self._open and self._queue and not self._closing:  # one came as it ended
                self._busy = True
                self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _handled(self, key: events.Event) -> None:
        """Wait until the app has taken ``key`` from its queue."""
        done = asyncio.Event()
        self._app.call_later(done.set)  # queued behind the key
        try:
            await asyncio.wait_for(done.wait(), BARRIER_TIMEOUT * 5)
        except asyncio.TimeoutError:
            pass

    async def settle(self) -> None:
        """Until every queue of the app and its screen has run what it held and neither
        the focus nor the screen changed in the last pass."""
        for _ in range(SETTLE_ROUNDS):
            before = self._where()
            await self._barrier()
            if self._where() == before and not self._queued():
                return

    def _where(self) -> tuple[object, ...]:
        """The screen on top, the focus and the stack's depth (None: no screen now)."""
        app = self._app
        try:
            return app.screen, app.focused, len(app.screen_stack)
        except Exception:  # no screen yet (start-up) or any more
            return (None,)

    def _nodes(self) -> list:
        app = self._app
        try:
            screen = app.screen
        except Exception:  # no screen yet (start-up) or any more
            return [app]
        return [app, *screen.walk_children(with_self=True)]

    def _queued(self) -> bool:
        return any(compat.messages_queued(node) for node in self._nodes())

    async def _barrier(self) -> None:
        """Every node has run the messages queued before this call (Textual's own Pilot
        waits for a screen the same way)."""
        count = 0
        zero = asyncio.Event()

        def one_done() -> None:
            nonlocal count
            count -= 1
            if count == 0:
                zero.set()

        for node in self._nodes():
            if node.call_later(one_done):
                count += 1
        if count:
            try:
                await asyncio.wait_for(zero.wait(), BARRIER_TIMEOUT)
            except asyncio.TimeoutError:
                pass

    async def _searched(self) -> bool:
        """Until a screen that searches as it is typed into (the command palette) has the
        results of what was typed: enter picks from them, not from those of a shorter
        text, nor from none yet. True when it waited."""
        app = self._app
        try:
            screen = app.screen
        except Exception:  # no screen yet (start-up) or any more
            return False
        group = compat.search_worker_group(screen)
        if group is None:
            return False
        waited = False
        started = time.monotonic()
        while any(w.node is screen and w.group == group and not w.is_finished
                  for w in app.workers) and time.monotonic() - started < SEARCH_LIMIT:
            waited = True
            await asyncio.sleep(HOLD_POLL)
        return waited

    async def _wait_holds(self) -> None:
        """Until each hold's flow opened something (a screen, the focus elsewhere) or
        ended; the keys queued behind a flow that opened nothing are dropped, in words."""
        app = self._app
        started = time.monotonic()
        while self._holds:
            hold = self._holds[0]
            if hold.opened(app) or hold.finished:
                self._holds.pop(0)
                await self.settle()
                if not hold.opened(app) and self._queue:
                    self._drop(hold.what)
                continue
            if time.monotonic() - started > HOLD_LIMIT:
                self._holds.pop(0)  # opened nothing in time: its keys are not the table's
                if self._queue:
                    self._drop(hold.what)
                continue
            await asyncio.sleep(HOLD_POLL)

    def _drop(self, what: str, why: str = "opened nothing") -> None:
        count = len(self._queue)
        self._queue.clear()
        self.dropped += count
        if self._notify is not None:
            keys = "key" if count == 1 else "keys"
            self._notify(f"{what} {why}: the {count} {keys} typed after it "
                         "were not used.")


class _Hold:
    """A flow opening something, and what the UI was when it started."""

    def __init__(self, worker: "Worker[Any]", what: str, screen, focused, depth: int
                 ) -> None:
        self.worker = worker
        self.what = what
        self.screen = screen
        self.focused = focused
        self.depth = depth
        self.external = False
        """The flow gave the terminal to another program (:meth:`KeyGate.handed_over`)."""

    @property
    def finished(self) -> bool:
        return self.worker.is_finished

    def opened(self, app: "App") -> bool:
        """A screen came up, the focus went somewhere new (a console tab), or another
        program got the terminal."""
        if self.external:
            return True
        try:
            screen = app.screen
        except Exception:
            return False
        return screen is not self.screen or len(app.screen_stack) != self.depth \
            or app.focused is not self.focused


def handed_over(app: "App") -> None:
    """Tell ``app``'s key gate (if it has one) that the flow running gave the terminal to
    another program: :meth:`KeyGate.handed_over`."""
    keys = getattr(app, "keys", None)
    if isinstance(keys, KeyGate):
        keys.handed_over()


def _again(event: events.Key | events.Paste, app: "App") -> events.Key | events.Paste:
    """A fresh copy of a queued key (or paste), marked as released by the gate, sent by
    the app as the driver's are (Textual stops a message bubbling at its sender: a key
    "from" the screen never reached the app's bindings)."""
    copy: events.Key | events.Paste = events.Paste(event.text) \
        if isinstance(event, events.Paste) else events.Key(event.key, event.character)
    copy.set_sender(app)
    setattr(copy, _RELEASED, True)
    return copy
