"""Repeatable ids: ``uuid.uuid4`` seeded while a bench runs, re-seeded per unit."""

from __future__ import annotations

import random
import uuid
from typing import Any


class SeededIds:
    """Seeds ``uuid.uuid4`` while a bench runs, re-seeded per unit.

    Some backends name what they store with ``uuid4`` (mem0 does) and show that id in the
    formatted context, as the design asks. A uuid costs 20 to 33 tokens, so random ids
    change how much fits in the budget and the same command would not give the same
    metrics. Per-unit seeds keep a resumed run identical to an uninterrupted one. Ids stay
    unique within a run; turn it off (``deterministic_ids=False``) for a shared server
    that must never see an id twice.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._real: Any = None

    def reseed(self, key: str) -> None:
        self._rng.seed(f"{self.seed}:{key}")

    def _uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def __enter__(self) -> SeededIds:
        self._real, uuid.uuid4 = uuid.uuid4, self._uuid4
        return self

    def __exit__(self, *exc: object) -> None:
        uuid.uuid4 = self._real


