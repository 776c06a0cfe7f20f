"""App-wide messages (past-tense facts)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class InventoryChanged(Message):
    """Something in the inventory changed; coalesced by the main screen."""

    remote: str
