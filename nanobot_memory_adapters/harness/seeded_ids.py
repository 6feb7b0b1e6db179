"""Repeatable ids: ``uuid.uuid4`` seeded while a bench runs, re-seeded per unit and
session."""

from __future__ import annotations

import random
import sys
import uuid
from typing import Any

_REAL_UUID4 = uuid.uuid4
_active: list[SeededIds] = []


def _seeded_uuid4() -> uuid.UUID:
    """``uuid4`` while a ``SeededIds`` is active (its caller's stream), else the real one.
    Installed as ``uuid.uuid4`` and in every module that imported ``uuid4`` by name
    (graphiti's models do: ``from uuid import uuid4``), and left there: after the run it
    is the real ``uuid4`` again."""
    if not _active:
        return _REAL_UUID4()
    caller = sys._getframe(1).f_globals.get("__name__", "?")
    return _active[-1].draw(caller)


class SeededIds:
    """Seeds ``uuid.uuid4`` while a bench runs, re-seeded per unit and per session.

    Some backends name what they store with ``uuid4`` (mem0 and Graphiti do) and show
    that id in the formatted context, as the design asks. A uuid costs 20 to 33 tokens,
    so random ids change how much fits in the budget and the same command would not give
    the same metrics. Seeds per unit and session keep a resumed unit's ids, after the
    session it replays, those of an uninterrupted run (``unit_progress.py``).

    Each calling module draws from a stream of its own (seeded by run seed, unit and
    module name): mem0's memory ids do not shift when the OpenAI client draws an
    idempotency key on another thread, or an LLM server in the same process draws a
    completion id, so the ids do not depend on thread timing, on what else runs in the
    process, or on which worker runs the unit. Ids stay unique within a run; turn it off
    (``deterministic_ids=False``) for a shared server that must never see an id twice.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._key = ""
        self._streams: dict[str, random.Random] = {}
        self._saved: Any = None

    def reseed(self, key: str) -> None:
        self._key = key
        self._streams = {}

    def draw(self, caller: str) -> uuid.UUID:
        stream = self._streams.get(caller)
        if stream is None:
            stream = self._streams[caller] = random.Random(f"{self.seed}:{self._key}:{caller}")
        return uuid.UUID(int=stream.getrandbits(128), version=4)

    def __enter__(self) -> SeededIds:
        self._saved = uuid.uuid4
        uuid.uuid4 = _seeded_uuid4
        for module in list(sys.modules.values()):
            try:
                if getattr(module, "uuid4", None) is _REAL_UUID4:
                    module.uuid4 = _seeded_uuid4  # type: ignore[attr-defined]
            except Exception:  # a lazy module may refuse attribute access
                continue
        _active.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _active.remove(self)
        uuid.uuid4 = self._saved
