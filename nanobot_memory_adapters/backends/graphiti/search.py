"""Graphiti's read path: its own search recipes and filters, and the facts as items
(with validity times and the events they derive from)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from graphiti_core import Graphiti
from graphiti_core.nodes import EpisodicNode
from graphiti_core.search.search_config import SearchConfig, SearchResults
from graphiti_core.search.search_filters import (
    ComparisonOperator,
    DateFilter,
    SearchFilters,
)

from nanobot_memory_adapters import sizing
from nanobot_memory_adapters.backends.graphiti.config import (
    RECIPES,
    GraphitiConfig,
)
from nanobot_memory_adapters.backends.graphiti.graph import GraphitiGraph
from nanobot_memory_adapters.backends.graphiti.ids import (
    KUZU_FTS_SPECIAL,
    event_id_of,
)
from nanobot_memory_adapters.backends.graphiti.records import dump, edge_raw, utc
from nanobot_memory_adapters.base import (
    NativeRetrieval,
)
from nanobot_memory_adapters.contract import (
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.timeparse import require_time


class GraphitiSearch:
    """One ``search_`` per request with the configured recipe, the request's filters and
    its scope's group as the boundary; the results as items."""

    def __init__(self, store: GraphitiGraph, config: GraphitiConfig) -> None:
        self.store = store
        self.config = config

    def search_filters(self, request: RetrieveRequest) -> tuple[SearchFilters, dict[str, Any],
                                                                list[str]]:
        """Graphiti's own SearchFilters for current-facts-only / as-of reads."""
        filters = dict(request.filters)
        warnings_: list[str] = []
        current = bool(filters.pop("current_facts_only", self.config.search.current_facts_only))
        as_of_value = filters.pop("as_of", None)
        for key in filters:
            warnings_.append(f"filter {key!r} is not supported by graphiti and was ignored")
        described: dict[str, Any] = {}
        if as_of_value is not None:
            as_of = require_time(as_of_value, "filters.as_of").astimezone(UTC)
            described["as_of"] = as_of.isoformat()
            return (
                SearchFilters(
                    valid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=as_of,
                                    comparison_operator=ComparisonOperator.less_than_equal)],
                    ],
                    invalid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=as_of,
                                    comparison_operator=ComparisonOperator.greater_than)],
                    ],
                ),
                described,
                warnings_,
            )
        if current:
            described["current_facts_only"] = True
            now = datetime.now(UTC)
            return (
                SearchFilters(
                    invalid_at=[
                        [DateFilter(comparison_operator=ComparisonOperator.is_null)],
                        [DateFilter(date=now, comparison_operator=ComparisonOperator.greater_than)],
                    ]
                ),
                described,
                warnings_,
            )
        return SearchFilters(), described, warnings_

    def search_config(self, limit: int) -> SearchConfig:
        """A private copy of the configured recipe (``search()`` mutates shared recipes)."""
        config = RECIPES[self.config.search.recipe].model_copy(deep=True)
        config.limit = limit
        config.reranker_min_score = self.config.search.reranker_min_score
        if self.config.search.sim_min_score is not None:
            for part in (config.edge_config, config.node_config, config.community_config):
                if part is not None:
                    part.sim_min_score = self.config.search.sim_min_score
        return config

    def query_text(self, request: RetrieveRequest) -> str:
        query = request.query
        tags = request.tags()
        if tags and self.config.search.tags_in_query:
            query = f"{query} ({'; '.join(f'{k}: {v}' for k, v in tags.items())})"
        if self.config.database.provider == "kuzu":
            # Graphiti hands the query to Kuzu's QUERY_FTS_INDEX unquoted (it escapes only
            # Lucene queries), and Kuzu reads ? * \ as pattern characters: "called?" made
            # the whole BM25 half of the search return nothing for every question.
            query = KUZU_FTS_SPECIAL.sub(" ", query)
        return query

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        graphiti = await self.store.graphiti()
        group = self.store.group_id(request.scope)
        if not self.store.settled(group):  # a new FalkorDB graph: its indexes first (once:
            await self.store.driver_for(graphiti, group)  # each clone starts a build)
        search_cfg = self.config.search
        limit = sizing.top_k(request.budget, search_cfg.item_text_tokens, search_cfg.max_results)
        filters, described, warnings_ = self.search_filters(request)
        config = self.search_config(limit)
        query = self.query_text(request)
        results: SearchResults = await graphiti.search_(
            query, config=config, group_ids=[group], search_filter=filters
        )
        events = await self._episode_events(graphiti, group, results)
        items = self._items(results, group, events)
        return NativeRetrieval(
            items=items,
            raw={
                "group_id": group,
                "edges": [edge_raw(e) for e in results.edges],
                "edge_reranker_scores": list(results.edge_reranker_scores),
                "nodes": [dump(n, "name_embedding") for n in results.nodes],
                "node_reranker_scores": list(results.node_reranker_scores),
                "episodes": [dump(e) for e in results.episodes],
                "episode_reranker_scores": list(results.episode_reranker_scores),
                "communities": [dump(c, "name_embedding") for c in results.communities],
            },
            native_operation="graphiti.search_",
            native_request={
                "recipe": search_cfg.recipe,
                "limit": limit,
                "group_ids": [group],
                "reranker_min_score": config.reranker_min_score,
                "query_tags": request.tags() if search_cfg.tags_in_query else {},
                **described,
            },
            warnings=warnings_,
        )

    async def _episode_events(
        self, graphiti: Graphiti, group: str, results: SearchResults
    ) -> dict[str, str] | None:
        """episode uuid -> the event id it was recorded from, for the facts returned
        (Graphiti's own provenance: a fact's ``episodes``); None when switched off."""
        if not self.config.search.episode_provenance:
            return None
        uuids = sorted({u for e in results.edges if e.group_id == group for u in e.episodes})
        if not uuids:
            return {}
        driver = await self.store.driver_for(graphiti, group)
        episodes = await EpisodicNode.get_by_uuids(driver, uuids)
        found: dict[str, str] = {}
        for episode in episodes:
            event = event_id_of(episode.source_description)
            if episode.group_id == group and event:
                found[episode.uuid] = event
        return found

    def _items(
        self, results: SearchResults, group: str, events: dict[str, str] | None = None
    ) -> list[RetrievedItem]:
        grouped = self.config.search.recipe.startswith("combined")
        items: list[RetrievedItem] = []
        for edge, score in in_group(results.edges, results.edge_reranker_scores, group):
            items.append(
                RetrievedItem(
                    native_id=edge.uuid,
                    text=edge.fact,
                    native_type="entity_edge",
                    group="facts" if grouped else None,
                    score=score,
                    created_at=utc(edge.created_at),
                    valid_at=utc(edge.valid_at),
                    invalid_at=utc(edge.invalid_at),
                    expired_at=utc(edge.expired_at),
                    source_event_ids=(
                        [events[u] for u in edge.episodes if u in events]
                        if events is not None else None
                    ),
                    metadata={
                        "relation": edge.name,
                        "episodes": list(edge.episodes),
                        "source_node_uuid": edge.source_node_uuid,
                        "target_node_uuid": edge.target_node_uuid,
                        "group_id": edge.group_id,
                    },
                    raw=edge_raw(edge),
                )
            )
        if not grouped:
            return items
        for node, score in in_group(results.nodes, results.node_reranker_scores, group):
            items.append(
                RetrievedItem(
                    native_id=node.uuid,
                    text=f"{node.name}: {node.summary}" if node.summary else node.name,
                    native_type="entity_node",
                    group="entities",
                    score=score,
                    created_at=utc(node.created_at),
                    metadata={"labels": list(node.labels), "group_id": node.group_id},
                    raw=dump(node, "name_embedding"),
                )
            )
        for episode, score in in_group(results.episodes, results.episode_reranker_scores,
                                       group):
            items.append(
                RetrievedItem(
                    native_id=episode.uuid,
                    text=episode.content,
                    native_type="episode",
                    group="episodes",
                    score=score,
                    created_at=utc(episode.created_at),
                    valid_at=utc(episode.valid_at),
                    source_event_ids=(
                        [e] if (e := event_id_of(episode.source_description)) else None
                    ),
                    metadata={"name": episode.name, "group_id": episode.group_id},
                    raw=dump(episode),
                )
            )
        for community, score in in_group(results.communities,
                                         results.community_reranker_scores, group):
            items.append(
                RetrievedItem(
                    native_id=community.uuid,
                    text=f"{community.name}: {community.summary}",
                    native_type="community",
                    group="communities",
                    score=score,
                    created_at=utc(community.created_at),
                    raw=dump(community, "name_embedding"),
                )
            )
        return items


class _Grouped(Protocol):
    @property
    def group_id(self) -> str: ...


_R = TypeVar("_R", bound=_Grouped)


def in_group(
    records: Sequence[_R], scores: Sequence[float], group: str
) -> Iterator[tuple[_R, float | None]]:
    """The records of ``group`` with their reranker scores (None past the scores' end).
    ``group_ids`` in the search is the boundary; this filter is defense in depth."""
    for i, record in enumerate(records):
        if record.group_id == group:
            yield record, scores[i] if i < len(scores) else None

