"""Capped exponential backoff with jitter, for every reconnect loop (backends and the UI's
inventory alike)."""

from __future__ import annotations

import random


class Backoff:
    """``next()`` gives 0.5 s, 1 s, 2 s, ... up to ``cap``, each +-20 %; ``reset()`` after a
    success."""

    def __init__(self, first: float = 0.5, cap: float = 10.0) -> None:
        self.first = first
        self.cap = cap
        self.attempt = 0

    def reset(self) -> None:
        self.attempt = 0

    def next(self) -> float:
        delay = min(self.cap, self.first * (2 ** self.attempt))
        self.attempt += 1
        return delay * random.uniform(0.8, 1.2)
