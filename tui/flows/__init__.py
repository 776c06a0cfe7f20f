"""What the keys do: one module per family of actions (lifecycle, transfer, images, guest
settings, snapshots, consoles, creating, limits).

A flow is an ``async def flow(ctx: Context) -> None``: it asks the user what it needs
(dialogs), calls the backend through the inventory, and reports in words. It gets a
:class:`~tui.flows.context.Context` — the inventory, the selected instance or remote and its
backend — never the main screen. The action table (``tui/actions.py``) says which key runs
which flow and what the flow needs from the backend.
"""
