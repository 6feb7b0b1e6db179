"""``SupportsProvenance``: where a fact came from, what Graphiti invalidated when."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.edges import EntityEdge, get_entity_edge_from_record
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query
from graphiti_core.nodes import EpisodicNode
from graphiti_core.search.search_filters import (
    ComparisonOperator,
    DateFilter,
    SearchFilters,
    edge_search_filter_query_constructor,
)

from nanobot_memory_adapters.backends.graphiti.graph import GraphitiGraph
from nanobot_memory_adapters.backends.graphiti.records import dump, edge_raw
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
)
from nanobot_memory_adapters.timeparse import require_time


class GraphitiProvenance:
    """``SupportsProvenance`` with Graphiti's own queries, inside the scope's group."""

    def __init__(self, graph: GraphitiGraph, *, backend_name: str) -> None:
        self.store = graph
        self.backend_name = backend_name

    async def provenance(
        self, scope: MemoryScope, native_id: str | None = None, **query: Any
    ) -> dict[str, Any]:
        """Graphiti's answer to "where did this fact come from" or "what changed when".

        - ``provenance(scope, fact_uuid)``: the fact and its source episodes.
        - ``provenance(scope, invalidated_from=..., invalidated_to=..., limit=100)``: facts
          Graphiti invalidated in that time range (either bound optional), oldest first.
        """
        return await self._provenance(scope, native_id, query)

    async def _provenance(
        self, scope: MemoryScope, native_id: str | None, query: dict[str, Any]
    ) -> dict[str, Any]:
        graphiti = await self.store.graphiti()
        group = self.store.group_id(scope)
        driver = await self.store.driver_for(graphiti, group)
        if native_id is not None:
            if query:
                raise AdapterError(
                    f"unexpected options with a fact id: {sorted(query)}",
                    backend_name=self.backend_name, operation="provenance",
                    raw={"options": sorted(query)},
                )
            return await self._fact_sources(driver, group, native_id)
        allowed = {"invalidated_from", "invalidated_to", "limit"}
        unknown = sorted(set(query) - allowed)
        if unknown or not (set(query) & {"invalidated_from", "invalidated_to"}):
            raise AdapterError(
                "provenance takes a fact id, or invalidated_from/invalidated_to "
                f"(+ limit); got {sorted(query) or 'nothing'}",
                backend_name=self.backend_name, operation="provenance",
                raw={"options": sorted(query)},
            )
        return await self._invalidated(driver, group, query)

    async def _fact_sources(self, driver: GraphDriver, group: str, uuid: str) -> dict[str, Any]:
        edges = await EntityEdge.get_by_uuids(driver, [uuid])
        edges = [e for e in edges if e.group_id == group]
        if not edges:
            return {"group_id": group, "fact": None, "episodes": [],
                    "detail": "no fact with this id in this scope"}
        edge = edges[0]
        episodes = await EpisodicNode.get_by_uuids(driver, list(edge.episodes))
        episodes = [e for e in episodes if e.group_id == group]
        return {
            "group_id": group,
            "fact": edge_raw(edge),
            "episodes": [
                {**dump(e), "reference_time": dump(e)["valid_at"]}
                for e in episodes
            ],
        }

    async def _invalidated(
        self, driver: GraphDriver, group: str, query: dict[str, Any]
    ) -> dict[str, Any]:
        bounds: list[DateFilter] = [
            DateFilter(comparison_operator=ComparisonOperator.is_not_null)
        ]
        described: dict[str, str] = {}
        if query.get("invalidated_from") is not None:
            start = require_time(query["invalidated_from"], "invalidated_from").astimezone(UTC)
            bounds.append(DateFilter(date=start,
                                     comparison_operator=ComparisonOperator.greater_than_equal))
            described["invalidated_from"] = start.isoformat()
        if query.get("invalidated_to") is not None:
            end = require_time(query["invalidated_to"], "invalidated_to").astimezone(UTC)
            bounds.append(DateFilter(date=end,
                                     comparison_operator=ComparisonOperator.less_than_equal))
            described["invalidated_to"] = end.isoformat()
        limit = int(query.get("limit") or 100)
        # Graphiti's own filter builder and record parser; the filtering runs in the database.
        clauses, params = edge_search_filter_query_constructor(
            SearchFilters(invalid_at=[bounds]), driver.provider
        )
        # The filter builder names parameters by position; the first bound has none.
        if driver.provider == GraphProvider.KUZU:
            pattern = "(n:Entity)-[:RELATES_TO]->(e:RelatesToNode_)-[:RELATES_TO]->(m:Entity)"
        else:
            pattern = "(n:Entity)-[e:RELATES_TO]->(m:Entity)"
        cypher = (
            f"MATCH {pattern} WHERE e.group_id = $group_id AND "
            + " AND ".join(clauses)
            + " RETURN "
            + get_entity_edge_return_query(driver.provider)
            + f" ORDER BY e.invalid_at ASC LIMIT {limit:d}"
        )
        records, _, _ = await driver.execute_query(cypher, group_id=group, routing_="r", **params)
        facts = [get_entity_edge_from_record(r, driver.provider) for r in records]
        return {
            "group_id": group,
            "query": {**described, "limit": limit},
            "facts": [
                edge_raw(f) for f in facts if f.group_id == group and f.invalid_at is not None
            ],
        }


