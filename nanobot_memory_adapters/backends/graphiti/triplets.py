"""The ``fact_triple`` ingest mode (``ingest.fact_triples``): Graphiti ``add_triplet``."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode

from nanobot_memory_adapters.backends.graphiti.adapter import GraphitiAdapter
from nanobot_memory_adapters.backends.graphiti.records import dump, edge_raw
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
)
from nanobot_memory_adapters.timeparse import require_time
from nanobot_memory_adapters.tracing import redact


class GraphitiTripletAdapter(GraphitiAdapter):
    """The same adapter with the ``fact_triple`` ingest mode (``ingest.fact_triples``)."""

    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """``add_triplet``: payload ``{source, target, relation, fact, valid_at?, invalid_at?}``
        (source/target are entity names) -> Graphiti ``add_triplet`` in the scope's group."""
        if operation != "add_triplet":
            raise AdapterError(
                f"unsupported native mutation {operation!r}; graphiti supports 'add_triplet'",
                backend_name=self.backend_name, operation="native_mutation",
                raw={"operation": operation},
            )
        if self.mode.read_only:
            trace = self._trace("native_mutation", scope=scope.key, status="skipped_read_only")
            self._emit(trace)
            return {"status": "skipped_read_only"}
        return await self._call("native_mutation", lambda: self._triplet(scope, payload))

    async def _triplet(self, scope: MemoryScope, payload: dict[str, Any]) -> dict[str, Any]:
        missing = [k for k in ("source", "target", "relation", "fact") if not payload.get(k)]
        if missing:
            raise ValueError(f"add_triplet payload lacks {missing}")
        graphiti = await self.graphiti()
        group = self.group_id(scope)
        now = datetime.now(UTC)
        source = EntityNode(name=str(payload["source"]), group_id=group, labels=["Entity"],
                            created_at=now)
        target = EntityNode(name=str(payload["target"]), group_id=group, labels=["Entity"],
                            created_at=now)
        edge = EntityEdge(
            source_node_uuid=source.uuid,
            target_node_uuid=target.uuid,
            name=str(payload["relation"]),
            fact=str(payload["fact"]),
            group_id=group,
            created_at=now,
            valid_at=require_time(payload["valid_at"], "valid_at").astimezone(UTC)
            if payload.get("valid_at") else None,
            invalid_at=require_time(payload["invalid_at"], "invalid_at").astimezone(UTC)
            if payload.get("invalid_at") else None,
        )
        started = time.perf_counter()
        async with self._lock_for(group):
            result = await graphiti.add_triplet(source, edge, target)
        trace = self._trace(
            "native_mutation",
            native_operation="graphiti.add_triplet",
            native_request=redact({"group_id": group, "relation": edge.name}),
            scope=scope.key,
            native_ids=[e.uuid for e in result.edges],
            latency_ms=(time.perf_counter() - started) * 1000,
            status="committed",
        )
        self._emit(trace)
        return {
            "status": "committed",
            "group_id": group,
            "edges": [edge_raw(e) for e in result.edges],
            "nodes": [dump(n, "name_embedding") for n in result.nodes],
        }
