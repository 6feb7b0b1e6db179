"""The ``fact_triple`` ingest mode (``ingest.fact_triples``): Graphiti ``add_triplet``.

``GraphitiAdapter.native_mutation`` calls ``add_triplet`` when the block declares the mode
(the capability is declared from config, not by a subclass)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from graphiti_core import Graphiti
from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode

from nanobot_memory_adapters.backends.graphiti.records import dump, edge_raw
from nanobot_memory_adapters.timeparse import require_time


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


async def add_triplet(
    graphiti: Graphiti, source: EntityNode, edge: EntityEdge, target: EntityNode
) -> dict[str, Any]:
    """Graphiti ``add_triplet``; the stored edges and nodes as JSON."""
    result = await graphiti.add_triplet(source, edge, target)
    return {
        "status": "committed",
        "group_id": edge.group_id,
        "edges": [edge_raw(e) for e in result.edges],
        "nodes": [dump(n, "name_embedding") for n in result.nodes],
    }
