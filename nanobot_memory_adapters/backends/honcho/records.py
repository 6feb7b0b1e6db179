"""Honcho records as JSON."""

from __future__ import annotations

from typing import Any


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
