"""Graphiti's write path: an event as one ``add_episode`` (never twice: a replayed event's
episode is looked up first), and the ``fact_triple`` mode's ``add_triplet``, which the
block declares with ``ingest.fact_triples`` (a capability from config, not a subclass)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode, EpisodeType
from pydantic import create_model

from nanobot_memory_adapters.backends.graphiti.config import GraphitiConfig
from nanobot_memory_adapters.backends.graphiti.graph import GraphitiGraph
from nanobot_memory_adapters.backends.graphiti.ids import (
    episode_name,
    event_id_of,
    source_description,
)
from nanobot_memory_adapters.backends.graphiti.records import dump, edge_raw
from nanobot_memory_adapters.base import NativeWrite
from nanobot_memory_adapters.contract import MemoryEvent, MemoryScope
from nanobot_memory_adapters.timeparse import require_time
from nanobot_memory_adapters.tracing import redact


@dataclass(frozen=True)
class SavedEpisode:
    """An episode Graphiti already holds for an event: processed when ``add_episode``
    finished it (it saves the episode with its entities and facts in one step), or only
    saved by a bulk call that failed before extraction."""

    uuid: str
    edges: list[str]
    mentions: int

    @property
    def processed(self) -> bool:
        return bool(self.edges or self.mentions)


class GraphitiWrites:
    """Episodes (body, ingest options, the replay lookup, ``add_episode``) and triplets."""

    def __init__(self, store: GraphitiGraph, config: GraphitiConfig, *,
                 backend_name: str) -> None:
        self.backend_name = backend_name
        self.store = store
        self.config = config
        ingest = config.ingest
        self._entity_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.entity_types.items()
        } or None
        self._edge_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.edge_types.items()
        } or None
        self._edge_type_map = {
            (s.source, s.target): list(s.edge_types) for s in ingest.edge_type_map
        } or None

    # -- episodes --------------------------------------------------------------------------
    def _speaker(self, event: MemoryEvent, role: str, name: str | None) -> str:
        if name:
            return name
        if self.config.ingest.speaker_labels == "roles":
            return role
        return {"user": event.user_id, "assistant": event.agent_id}.get(role, role)

    def episode_body(self, event: MemoryEvent) -> str:
        """Graphiti's message format: one ``speaker: content`` line per message."""
        return "\n".join(
            f"{self._speaker(event, m.role, m.name)}: {m.content}" for m in event.messages
        )

    def episode_kwargs(self) -> dict[str, Any]:
        """The ingest options ``add_episode`` and ``add_episode_bulk`` both take."""
        ingest = self.config.ingest
        kwargs: dict[str, Any] = {}
        if self._entity_types:
            kwargs["entity_types"] = self._entity_types
        if self._edge_types:
            kwargs["edge_types"] = self._edge_types
        if self._edge_type_map:
            kwargs["edge_type_map"] = self._edge_type_map
        if ingest.excluded_entity_types:
            kwargs["excluded_entity_types"] = list(ingest.excluded_entity_types)
        if ingest.custom_extraction_instructions:
            kwargs["custom_extraction_instructions"] = ingest.custom_extraction_instructions
        return kwargs

    async def saved_episode(self, event: MemoryEvent) -> SavedEpisode | None:
        """This event's episode if its group holds one (by name, checked against the event
        id in ``source_description``), with the facts already extracted from it."""
        graphiti = await self.store.graphiti()
        group = self.store.group_id(event.scope())
        driver = await self.store.driver_for(graphiti, group)
        records, _, _ = await driver.execute_query(
            "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.name = $name "
            "OPTIONAL MATCH (e)-[:MENTIONS]->(n:Entity) "
            "RETURN e.uuid AS uuid, e.source_description AS source, "
            "e.entity_edges AS edges, count(n) AS mentions",
            group_id=group, name=episode_name(event), routing_="r",
        )
        for record in records:
            if event_id_of(record["source"]) in (event.event_id, None):
                return SavedEpisode(uuid=str(record["uuid"]),
                                    edges=[str(e) for e in record["edges"] or []],
                                    mentions=int(record["mentions"] or 0))
        return None

    async def record(self, event: MemoryEvent) -> NativeWrite:
        """``add_episode``, unless Graphiti already holds this event's episode: a processed
        one is not added again (a replay after a crash), one a failed bulk call only saved
        is processed in place by its uuid."""
        graphiti = await self.store.graphiti()
        group = self.store.group_id(event.scope())
        saved = await self.saved_episode(event)
        if saved is not None and saved.processed:
            return NativeWrite(
                status="committed", native_ids=[saved.uuid, *saved.edges],
                native_operation="Episodic lookup by name (graphiti driver query)",
                native_request={"group_id": group, "name": episode_name(event)},
                warnings=[f"event {event.event_id} is already in Graphiti (episode "
                          f"{saved.uuid}, {len(saved.edges)} facts); not added again"],
            )
        uuid = saved.uuid if saved is not None else None
        kwargs = self.episode_kwargs()
        request = {
            "name": episode_name(event),
            "source_description": source_description(event),
            "reference_time": event.timestamp,
            "source": EpisodeType.message,
            "group_id": group,
        }
        if uuid is not None:  # an episode a failed bulk call saved: process it in place
            kwargs["uuid"] = uuid
        async with self.store.lock_for(group):
            result = await graphiti.add_episode(
                episode_body=self.episode_body(event), **request, **kwargs
            )
        warnings_: list[str] = []
        if not result.edges:
            warnings_.append("Graphiti extracted no facts from this episode")
        invalidated = [e.uuid for e in result.edges if e.invalid_at is not None]
        return NativeWrite(
            status="committed",
            native_ids=[result.episode.uuid, *(e.uuid for e in result.edges)],
            native_operation="graphiti.add_episode",
            native_request={
                **request,
                "source": "message",
                "reference_time": event.timestamp.isoformat(),
                "entities": len(result.nodes),
                "facts": len(result.edges),
                "invalidated_facts": invalidated,
                **({"reprocessed_episode": uuid} if uuid else {}),
            },
            warnings=warnings_,
        )

    # -- the fact_triple mode (declared with ``ingest.fact_triples``) ----------------------
    #: ``store.NativeMutations``: the store offers this object as its ``mutations``
    operations = frozenset({"add_triplet"})
    read_operations: frozenset[str] = frozenset()

    async def run(self, scope: MemoryScope, operation: str,
                  payload: dict[str, Any]) -> dict[str, Any]:
        """``add_triplet`` (the only operation; the wrapper refuses others, and the store
        offers this only with ``ingest.fact_triples``): payload ``{source, target,
        relation, fact, valid_at?, invalid_at?}`` (source/target are entity names) ->
        Graphiti ``add_triplet`` in the scope's group."""
        return await self._add_triplet(scope, payload)

    async def _add_triplet(self, scope: MemoryScope, payload: dict[str, Any]) -> dict[str, Any]:
        group = self.store.group_id(scope)
        source, edge, target = triplet(payload, group)
        graphiti = await self.store.graphiti()
        async with self.store.lock_for(group):
            stored = await graphiti.add_triplet(source, edge, target)
        result = {
            "status": "committed",
            "group_id": edge.group_id,
            "edges": [edge_raw(e) for e in stored.edges],
            "nodes": [dump(n, "name_embedding") for n in stored.nodes],
        }
        # what the wrapper's trace of this mutation records
        result.update(native_operation="graphiti.add_triplet",
                      native_request=redact({"group_id": group, "relation": edge.name}),
                      native_ids=[e["uuid"] for e in result["edges"]])
        return result


def triplet(payload: dict[str, Any], group: str) -> tuple[EntityNode, EntityEdge, EntityNode]:
    """Graphiti's nodes and edge for ``{source, target, relation, fact, valid_at?,
    invalid_at?}`` (source/target are entity names) in ``group``."""
    missing = [k for k in ("source", "target", "relation", "fact") if not payload.get(k)]
    if missing:
        raise ValueError(f"add_triplet payload lacks {missing}")
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
    return source, edge, target
