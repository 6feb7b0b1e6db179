"""mem0's optional capabilities: readiness (immediate), native mutation (its own update /
delete / history on one memory of the scope), provenance (its record and history) and
native query (diagnostics: the scope's memory count, one memory's history). The provider
wrapper (``store.StoreProvider``) gates, wraps errors and traces each call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nanobot_memory_adapters.backends.mem0.config import (
    IDENTITY_KEYS,
)
from nanobot_memory_adapters.backends.mem0.requests import Mem0Requests
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
    Readiness,
)


class Mem0NativeOps:
    """mem0's own operations on one memory, on the scope's ``AsyncMemory``."""

    operations = frozenset({"update", "delete", "history"})
    read_operations = frozenset({"history"})

    def __init__(
        self, requests: Mem0Requests, native: Callable[[MemoryScope], Awaitable[Any]],
        *, backend_name: str, changed: Callable[[MemoryScope], None] = lambda scope: None,
    ) -> None:
        self.requests = requests
        self._native = native
        self.backend_name = backend_name
        self._changed = changed  # told after every update/delete (the replay index)

    async def run(self, scope: MemoryScope, operation: str,
                  payload: dict[str, Any]) -> dict[str, Any]:
        """``store.NativeMutations``: one of ``operations`` (the wrapper gates the writes)."""
        try:
            return await self.native_mutation(scope, operation, payload)
        finally:
            if operation not in self.read_operations:
                self._changed(scope)

    def scope_ids(self, scope: MemoryScope, operation: str) -> dict[str, str]:
        return self.requests.scope_ids(scope, operation)

    async def readiness(self, scope: MemoryScope) -> Readiness:
        self.scope_ids(scope, "readiness")
        return Readiness(
            status="ready", pending_count=0, waited_ms=0.0,
            detail="mem0 add is synchronous: memories are searchable when add returns",
        )

    async def _owned(self, scope: MemoryScope, native_id: str, operation: str) -> dict[str, Any]:
        """The memory, if it exists and belongs to ``scope``; never touch another scope's."""
        ids = self.scope_ids(scope, operation)
        memory = await self._native(scope)
        record = await memory.get(native_id)
        if not record or any(record.get(k) != v for k, v in ids.items()):
            raise AdapterError(
                f"memory {native_id!r} does not exist in scope {scope.key}",
                backend_name=self.backend_name, operation=operation,
                raw={"native_id": native_id, "scope": ids},
            )
        return record

    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """mem0's own ``update`` / ``delete`` / ``history`` on one memory of ``scope``.

        payload: ``{"native_id": ..., "text"?: ..., "metadata"?: {...}}``. Called past the
        wrapper's read-only gate (update and delete never reach here while read-only).
        """
        op = f"native_mutation.{operation}"  # one of ``operations``: the wrapper checked
        native_id = payload.get("native_id")
        if not isinstance(native_id, str) or not native_id:
            raise AdapterError(
                "payload needs 'native_id' (a mem0 memory id)",
                backend_name=self.backend_name, operation=op, raw={"payload": payload},
            )
        await self._owned(scope, native_id, op)
        memory = await self._native(scope)
        if operation == "history":
            rows = await memory.history(native_id)
            return {"status": "ok", "operation": operation, "native_id": native_id,
                    "native_operation": "AsyncMemory.history", "native_ids": [native_id],
                    "history": rows}
        if operation == "delete":
            result = await memory.delete(native_id)
        else:
            text, metadata = payload.get("text"), payload.get("metadata")
            if text is None and metadata is None:
                raise AdapterError(
                    "update needs 'text' and/or 'metadata'",
                    backend_name=self.backend_name, operation=op, raw={"payload": payload},
                )
            if metadata is not None and (IDENTITY_KEYS & set(metadata)):
                raise AdapterError(
                    "metadata may not change scope ids (user_id/agent_id/run_id/actor_id)",
                    backend_name=self.backend_name, operation=op, raw={"payload": payload},
                )
            result = await memory.update(native_id, text=text, metadata=metadata)
        return {"status": "committed", "operation": operation, "native_id": native_id,
                "native_operation": f"AsyncMemory.{operation}", "native_ids": [native_id],
                "result": result}

    async def provenance(
        self, scope: MemoryScope, native_id: str | None = None, **query: Any
    ) -> dict[str, Any]:
        """mem0's record and ``history`` for one memory of the scope; without an id, the
        scope's memories as listed natively by ``get_all(filters=<scope>)``."""
        if native_id is not None:
            record = await self._owned(scope, native_id, "provenance")
            memory = await self._native(scope)
            rows = await memory.history(native_id)
            return {"native_id": native_id, "memory": record, "history": rows}
        ids = self.scope_ids(scope, "provenance")
        memory = await self._native(scope)
        top_k = int(query.get("top_k", 100))
        listed = await memory.get_all(filters=ids, top_k=top_k)
        return {"scope": ids, "memories": listed.get("results", [])}

    async def native_query(
        self, scope: MemoryScope, query: str, **options: Any
    ) -> dict[str, Any]:
        """Diagnostics only (logged and traced, never put in a prompt). ``query`` names one:
        ``memory_count`` (the scope's memories, ``get_all(filters=<scope>)``, exact at any
        size: ``top_k`` is only the first page) or ``history``
        (``options["native_id"]``: mem0's ``history`` of one memory of the scope)."""
        if query not in ("memory_count", "history"):
            raise AdapterError(
                f"unknown diagnostic {query!r}; mem0 answers memory_count, history",
                backend_name=self.backend_name, operation="native_query", raw={"query": query},
            )
        if query == "history":
            native_id = options.get("native_id")
            if not isinstance(native_id, str) or not native_id:
                raise AdapterError(
                    "history needs native_id (a mem0 memory id)",
                    backend_name=self.backend_name, operation="native_query",
                    raw={"options": options},
                )
            rows = (await self.provenance(scope, native_id))["history"]
            return {"native_operation": "AsyncMemory.history", "native_id": native_id,
                    "native_ids": [native_id], "history": rows}
        # get_all returns at most top_k: a full page is listed again with twice the
        # room, so the count is exact (never top_k standing for "top_k or more")
        top_k = max(1, int(options.get("top_k", 10_000)))
        memories = (await self.provenance(scope, top_k=top_k))["memories"]
        while len(memories) >= top_k:
            top_k *= 2
            memories = (await self.provenance(scope, top_k=top_k))["memories"]
        return {"native_operation": "AsyncMemory.get_all", "memory_count": len(memories),
                "top_k": top_k}
