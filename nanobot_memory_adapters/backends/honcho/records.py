"""Honcho records as JSON, and the formatted context's group titles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nanobot_memory_adapters.contract import (
    RetrievedItem,
)


async def _reraise(exc: Exception) -> Any:
    raise exc


def message_json(m: Any) -> dict[str, Any]:
    return {"id": m.id, "content": m.content, "peer_id": m.peer_id, "session_id": m.session_id,
            "workspace_id": m.workspace_id, "metadata": m.metadata,
            "created_at": m.created_at.isoformat() if m.created_at else None,
            "token_count": m.token_count}


def summary_json(s: Any) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"content": s.content, "message_id": s.message_id, "summary_type": s.summary_type,
            "created_at": s.created_at, "token_count": s.token_count}


GROUP_TITLES = {
    "representation": "## Honcho peer representation (derived; prose as Honcho wrote it)",
    "peer_card": "## Honcho peer card",
    "summary": "## Session summary",
    "messages": "## Recent session messages",
}


def group_title(group: str, members: Sequence[RetrievedItem]) -> str:
    return GROUP_TITLES.get(group, f"## {group}")
