"""Which events mem0 already holds, per scope: the replay check in O(1) per turn.

mem0's ``add`` has no idempotency key, so a replayed event (a resumed bench unit, an
outbox row redelivered after a crash) must be recognised before it is added again. Asking
mem0 ``get_all(filters=event_id)`` per turn made ingest quadratic: the embedded Qdrant
filters payloads in Python point by point, so every look-up scanned the whole store.

Instead, the first write to a scope lists the scope's memories once (mem0's own
``vector_store.list``, the call ``get_all`` makes) and keeps their event ids; every add
then records what it stored. The index lives in the Qdrant handle's own state
(``SharedStores.state``): adapters of one process on the same store share it, and it dies
with the handle, so a store opened again (after another process wrote to it) is listed
again. Qdrant's local mode admits one process per path, so while the handle is open no
other process writes behind the index.

A scope's entry is dropped (its next look-up lists the store again) by a reset, update or
delete, and by an add that failed, timed out or was cancelled: mem0 may have stored part
of it, or still be storing it in its worker thread. An add whose caller gave up runs on
to its end (shielded), and look-ups of its scopes wait for that end. Every drop bumps the
scope's generation; a listing that ran across a drop is not installed (it may predate a
reset).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import Any

ScopeKey = tuple[tuple[str, str], ...]


def scope_key(ids: dict[str, str]) -> ScopeKey:
    return tuple(sorted(ids.items()))


class StoredEvents:
    """event id -> ids of the memories mem0 stored from it, per scope of one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scopes: dict[ScopeKey, dict[str, list[str]]] = {}
        self._generations: dict[ScopeKey, int] = {}
        self._epoch = 0  # bumped by forget() of every scope
        # adds whose caller gave up (timeout, cancel) while mem0 goes on storing
        self._abandoned: dict[ScopeKey, int] = {}

    def abandoned(self, keys: Iterable[ScopeKey]) -> None:
        """An add to these scopes was given up while it still runs: look-ups wait for it."""
        with self._lock:
            for key in keys:
                self._abandoned[key] = self._abandoned.get(key, 0) + 1

    def settled(self, keys: Iterable[ScopeKey]) -> None:
        """An abandoned add finished: the scopes are listed again at their next look-up."""
        with self._lock:
            for key in keys:
                left = self._abandoned.get(key, 0) - 1
                if left > 0:
                    self._abandoned[key] = left
                else:
                    self._abandoned.pop(key, None)
        for key in keys:
            self.forget(key)

    def unsettled(self, key: ScopeKey) -> bool:
        with self._lock:
            return self._abandoned.get(key, 0) > 0

    def generation(self, key: ScopeKey) -> tuple[int, int]:
        """Changes whenever the scope is forgotten (taken before a listing starts)."""
        with self._lock:
            return self._epoch, self._generations.get(key, 0)

    def known(self, key: ScopeKey) -> bool:
        with self._lock:
            return key in self._scopes

    def lookup(self, key: ScopeKey, event_id: str) -> list[str]:
        with self._lock:
            return list(self._scopes.get(key, {}).get(event_id, ()))

    def load(self, key: ScopeKey, points: Iterable[Any],
             generation: tuple[int, int] | None = None) -> bool:
        """Index a scope from its listed points (payload ``event_id`` / ``event_ids``);
        False (nothing installed) when the scope was forgotten since ``generation``.

        Merged with anything recorded meanwhile, so a concurrent add is never lost."""
        index: dict[str, list[str]] = {}
        for point in points:
            payload = getattr(point, "payload", None) or {}
            events = {payload.get("event_id"), *(payload.get("event_ids") or ())}
            for event_id in events - {None}:
                index.setdefault(str(event_id), []).append(str(point.id))
        with self._lock:
            if generation is not None and generation != (
                    self._epoch, self._generations.get(key, 0)):
                return False  # a reset (or a failed add) ran while the scope was listed
            for event_id, ids in self._scopes.get(key, {}).items():
                have = index.setdefault(event_id, [])
                have.extend(i for i in ids if i not in have)
            self._scopes[key] = index
            return True

    def add(self, key: ScopeKey, event_id: str, native_ids: Iterable[str]) -> None:
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None:  # not loaded: the next look-up lists the scope anyway
                return
            have = scope.setdefault(event_id, [])
            have.extend(i for i in native_ids if i not in have)

    def forget(self, key: ScopeKey | None = None) -> None:
        """Drop one scope (or all): its next look-up lists the store again, and a listing
        under way is not installed."""
        with self._lock:
            if key is None:
                self._scopes.clear()
                self._epoch += 1
            else:
                self._scopes.pop(key, None)
                self._generations[key] = self._generations.get(key, 0) + 1


_STATE_KEY = "mem0.stored_events"
_state_lock = threading.Lock()


def stored_events_for(store_state: dict[str, Any], collection: str) -> StoredEvents:
    """The index of one collection, kept in its store handle's state
    (``QDRANT.state(path)``): it lives exactly as long as the open handle."""
    with _state_lock:
        per_collection = store_state.setdefault(_STATE_KEY, {})
        return per_collection.setdefault(collection, StoredEvents())


LISTING_ATTEMPTS = 3
#: Points asked for by the first listing of a scope (doubled while a listing comes back full).
LISTING_PAGE = 10_000
#: Seconds a look-up waits for an abandoned add of its scope to finish in mem0.
ABANDONED_WAIT_S = 120.0


async def ensure_loaded(index: StoredEvents, key: ScopeKey, memory: Any) -> None:
    """List the scope once (mem0's ``vector_store.list`` with the scope's filters).

    A listing that a reset (or a failed add) overtook is listed again; after
    ``LISTING_ATTEMPTS`` such races a retryable error says so, rather than guess. An
    add to the scope that its caller gave up on (still running in mem0's worker thread)
    is waited for first: a retry must see what it stores."""
    deadline = time.monotonic() + ABANDONED_WAIT_S
    while index.unsettled(key):
        if time.monotonic() > deadline:
            raise ScopeChanged(
                f"an earlier add to mem0 scope {dict(key)} that timed out is still running "
                f"after {ABANDONED_WAIT_S:.0f} s; nothing was written: retry the write")
        await asyncio.sleep(0.05)
    if index.known(key):
        return

    def list_scope() -> list[Any]:
        store = memory.vector_store  # the scope's own collection (scoped.py)
        top_k = LISTING_PAGE
        while True:  # a full page is listed again with twice the room: never cut short
            result = store.list(filters=dict(key), top_k=top_k)
            points = list((result[0] if isinstance(result, tuple | list) and result
                           and isinstance(result[0], list | tuple) else result) or [])
            if len(points) < top_k:
                return points
            top_k *= 2

    for _ in range(LISTING_ATTEMPTS):
        generation = index.generation(key)
        if index.load(key, await asyncio.to_thread(list_scope), generation):
            return
    raise ScopeChanged(
        f"mem0 scope {dict(key)} was reset or changed while it was being listed "
        f"({LISTING_ATTEMPTS} times in a row); nothing was written: retry the write")


class ScopeChanged(RuntimeError):
    """The scope kept changing while it was listed (the caller's write is retryable)."""
