"""Graphiti records as JSON (embeddings left out, Kuzu's naive UTC times marked UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from graphiti_core.edges import EntityEdge
from pydantic import BaseModel


def utc(value: datetime | None) -> datetime | None:
    """Kuzu returns naive timestamps that are UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def dump(model: BaseModel, *exclude: str) -> dict[str, Any]:
    """A native record as JSON, embeddings left out, naive (Kuzu) times marked UTC."""
    times = {
        k: utc(v) for k, v in model.__dict__.items() if isinstance(v, datetime)
    }
    return model.model_copy(update=times).model_dump(mode="json", exclude=set(exclude))


def edge_raw(edge: EntityEdge) -> dict[str, Any]:
    return dump(edge, "fact_embedding")


