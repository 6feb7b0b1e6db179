"""Which events mem0 already holds, per scope: the replay check in O(1) per turn.

mem0's ``add`` has no idempotency key, so a replayed event (a resumed bench unit, an
outbox row redelivered after a crash) must be recognised before it is added again. Asking
mem0 ``get_all(filters=event_id)`` per turn made ingest quadratic: the embedded Qdrant
filters payloads in Python point by point, so every look-up scanned the whole store.

Instead, the first write to a scope in this process lists the scope's memories once
(mem0's own ``vector_store.list``, the call ``get_all`` makes) and keeps their event ids;
every add then records what it stored. Qdrant's local mode admits one process per path,
so no other process writes behind the index; adapters of one process on the same store
share it (keyed by path and collection). A reset, update or delete drops the scope's
entry: the next write lists it again.
"""

from __future__ import annotations

import asyncio
import threading
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

    def known(self, key: ScopeKey) -> bool:
        with self._lock:
            return key in self._scopes

    def lookup(self, key: ScopeKey, event_id: str) -> list[str]:
        with self._lock:
            return list(self._scopes.get(key, {}).get(event_id, ()))

    def load(self, key: ScopeKey, points: Iterable[Any]) -> None:
        """Index a scope from its listed points (payload ``event_id`` / ``event_ids``).

        Merged with anything recorded meanwhile, so a concurrent add is never lost."""
        index: dict[str, list[str]] = {}
        for point in points:
            payload = getattr(point, "payload", None) or {}
            events = {payload.get("event_id"), *(payload.get("event_ids") or ())}
            for event_id in events - {None}:
                index.setdefault(str(event_id), []).append(str(point.id))
        with self._lock:
            for event_id, ids in self._scopes.get(key, {}).items():
                have = index.setdefault(event_id, [])
                have.extend(i for i in ids if i not in have)
            self._scopes[key] = index

    def add(self, key: ScopeKey, event_id: str, native_ids: Iterable[str]) -> None:
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None:  # not loaded: the next look-up lists the scope anyway
                return
            have = scope.setdefault(event_id, [])
            have.extend(i for i in native_ids if i not in have)

    def forget(self, key: ScopeKey | None = None) -> None:
        """Drop one scope (or all): its next look-up lists the store again."""
        with self._lock:
            if key is None:
                self._scopes.clear()
            else:
                self._scopes.pop(key, None)


_registry: dict[tuple[str, str], StoredEvents] = {}
_registry_lock = threading.Lock()


def stored_events_for(path: str, collection: str) -> StoredEvents:
    """The process-wide index of one store (Qdrant path + collection)."""
    with _registry_lock:
        return _registry.setdefault((path, collection), StoredEvents())


async def ensure_loaded(index: StoredEvents, key: ScopeKey, memory: Any,
                        collection: str) -> None:
    """List the scope once (mem0's ``vector_store.list`` with the scope's filters)."""
    if index.known(key):
        return

    def list_scope() -> list[Any]:
        store = memory.vector_store
        total = store.client.count(collection, exact=True).count
        result = store.list(filters=dict(key), top_k=max(int(total), 1))
        points = result[0] if isinstance(result, tuple | list) and result and isinstance(
            result[0], list | tuple) else result
        return list(points or [])

    index.load(key, await asyncio.to_thread(list_scope))
