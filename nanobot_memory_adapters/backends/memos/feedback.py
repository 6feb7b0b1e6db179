"""MemOS's native feedback (``POST /product/feedback``): the request and what it changed.

Pure functions; ``MemOSStore``'s ``feedback`` calls them when the block says
``feedback: true`` (the capability is declared from config, not by a subclass)."""

from __future__ import annotations

from typing import Any

from nanobot_memory_adapters.contract import FeedbackRequest


def feedback_body(
    request: FeedbackRequest, ids: dict[str, str], async_mode: str
) -> dict[str, Any]:
    """MemOS's ``APIFeedbackRequest`` for ``request`` in the scope's user and cube."""
    history = request.metadata.get("history") or []
    return {
        "user_id": ids["user_id"],
        "session_id": request.session_id,
        "history": history,
        "retrieved_memory_ids": request.native_ids or None,
        "feedback_content": request.feedback,
        "feedback_time": request.metadata.get("feedback_time"),
        "writable_cube_ids": [ids["cube_id"]],
        "async_mode": async_mode,
        "info": {k: v for k, v in request.metadata.items() if k != "history"} or None,
    }


def changed_ids(result: dict[str, Any]) -> list[str]:
    """The memory ids MemOS added or updated in answer to the feedback."""
    native_ids: list[str] = []
    for entry in result.get("data") or []:
        record = (entry or {}).get("record") or {}
        for op in ("add", "update"):
            native_ids += [str(r["id"]) for r in record.get(op) or [] if r.get("id")]
    return native_ids
