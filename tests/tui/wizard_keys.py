"""Driving corral's dialogs by keys, as a user would (shared by the Pilot tests)."""

from __future__ import annotations

from textual.widgets import Input, OptionList

from test_real_app import wait_for


async def choose(pilot, app, list_id: str, predicate, what: str) -> None:
    """Move the highlight of an OptionList with the arrow keys until ``predicate(index)``."""
    options = app.screen.query_one(list_id, OptionList)
    options.focus()
    for _ in range(options.option_count + 1):
        if options.highlighted is not None and predicate(options.highlighted):
            return
        await pilot.press("down")
    raise AssertionError(f"{what} not offered")


async def fill(pilot, app, input_id: str, text: str) -> None:
    """Focus an Input with tab/shift+tab as needed, clear it and type ``text``."""
    box = app.screen.query_one(input_id, Input)
    box.focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u")
    if text:
        await pilot.press(*text)


async def source_fields(pilot, app, *ids: str) -> None:
    """Until the chosen source's fields ``ids`` are drawn (those of the source before it
    removed)."""
    await wait_for(pilot, lambda: all(len(app.screen.query(i)) == 1 for i in ids),
                   what=f"the source's fields {ids}")


def problem(app) -> str:
    return str(app.screen.query_one("#wizard-problem").render())


async def wizard(pilot, app, *, remote: str, source, path: str = "", fields=None,
                 name: str, cpus: str = "", memory: str = "", disk: str | None = None,
                 user_data: str | None = None, start: bool = True,
                 placement: str | None = None) -> None:
    """Walk the launch wizard from N to Create. ``source(CreateSource) -> bool``; ``path``
    goes into the source's own value (``#wizard-field-value``), ``fields`` maps the ids of
    its other fields (``#wizard-field-<key>``) to what is typed there.

    Waits first for the main screen: a wizard that created an instance with start stays
    open until the start operation returns, which can be after the row already shows
    ``running`` (the daemon's event comes first); an ``N`` pressed then is the old wizard's."""
    await wait_for(pilot, lambda: app.screen is app.main_screen, timeout=60,
                   what="the main screen, before N")
    await pilot.press("N")
    await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WizardScreen",
                   timeout=30, what="the wizard")
    names = list(app.screen.backends)
    await choose(pilot, app, "#wizard-remote", lambda i: names[i] == remote, remote)
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.screen.step == "what", what="the 'what' step")
    sources = app.screen.sources
    await choose(pilot, app, "#wizard-source", lambda i: source(sources[i]), "the source")
    await source_fields(pilot, app, *(["#wizard-field-value"] if path else []), *fields or {})
    if path:
        await fill(pilot, app, "#wizard-field-value", path)
    for input_id, text in (fields or {}).items():
        await fill(pilot, app, input_id, text)
    await pilot.press("ctrl+n")
    await wait_for(pilot, lambda: app.screen.step == "name", what="the name step")
    await fill(pilot, app, "#wizard-name", name)
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.screen.step == "resources",
                   what=f"the resources step ({problem(app)})")
    await fill(pilot, app, "#wizard-cpus", cpus)
    await fill(pilot, app, "#wizard-memory", memory)
    if disk is not None:
        await fill(pilot, app, "#wizard-disk", disk)
    await pilot.press("ctrl+n")
    await wait_for(pilot, lambda: app.screen.step == "network",
                   what=f"the network step ({problem(app)})")
    if placement is not None:  # a cluster member or @group (the Select's value)
        app.screen.query_one("#wizard-target").value = placement
        await pilot.pause()
    await pilot.press("ctrl+n")
    if user_data is not None:
        await wait_for(pilot, lambda: app.screen.step == "cloud-init", what="cloud-init")
        area = app.screen.query_one("#wizard-user-data")
        area.focus()
        await pilot.press("ctrl+a")
        area.text = ""
        area.insert(user_data)
        await pilot.pause()
        await pilot.press("ctrl+n")
    await wait_for(pilot, lambda: app.screen.step == "summary",
                   what=f"the summary ({problem(app)})")
    if not start:
        app.screen.query_one("#wizard-start").value = False
    await pilot.press("ctrl+n")
