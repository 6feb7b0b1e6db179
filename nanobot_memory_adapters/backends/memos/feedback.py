"""``memos`` with ``feedback: true``: MemOS's native feedback (``SupportsFeedback``)."""

from __future__ import annotations

import time
from typing import Any

from nanobot_memory_adapters.backends.memos.adapter import MemOSAdapter
from nanobot_memory_adapters.contract import (
    FeedbackRequest,
    WriteReceipt,
)


class MemOSFeedbackAdapter(MemOSAdapter):
    """``memos`` with ``feedback: true``: also declares MemOS's feedback endpoint."""

    def feedback_request(self, request: FeedbackRequest) -> dict[str, Any]:
        ids = self.native_ids(request.scope, "apply_feedback")
        history = request.metadata.get("history") or []
        return {
            "user_id": ids["user_id"],
            "session_id": request.session_id,
            "history": history,
            "retrieved_memory_ids": request.native_ids or None,
            "feedback_content": request.feedback,
            "feedback_time": request.metadata.get("feedback_time"),
            "writable_cube_ids": [ids["cube_id"]],
            "async_mode": self.config.feedback_async_mode,
            "info": {k: v for k, v in request.metadata.items() if k != "history"} or None,
        }

    async def apply_feedback(self, request: FeedbackRequest) -> WriteReceipt:
        """POST /product/feedback (MemOS judges the feedback with its LLM and adds or
        updates memories itself). ``metadata.history``: the chat turns it refers to."""
        scope_key = request.scope.key
        if self._mode.read_only:
            trace = self._trace(
                "apply_feedback", scope=scope_key, status="skipped_read_only", latency_ms=0.0
            )
            self._emit(trace)
            return WriteReceipt(status="skipped_read_only", trace=trace)
        body = self.feedback_request(request)
        started = time.perf_counter()
        result = await self._call(
            "apply_feedback",
            lambda: self._request("apply_feedback", "POST", "/product/feedback", json=body),
        )
        latency = (time.perf_counter() - started) * 1000
        native_ids: list[str] = []
        for entry in result.get("data") or []:
            record = (entry or {}).get("record") or {}
            for op in ("add", "update"):
                native_ids += [str(r["id"]) for r in record.get(op) or [] if r.get("id")]
        sync = body["async_mode"] == "sync"
        trace = self._trace(
            "apply_feedback",
            native_operation="POST /product/feedback",
            scope=scope_key,
            native_request={k: v for k, v in body.items() if k not in ("history", "info")},
            native_ids=native_ids,
            latency_ms=latency,
            status="committed" if sync else "queued",
            warnings=[] if native_ids or not sync else ["MemOS derived no memory change"],
        )
        self._emit(trace)
        return WriteReceipt(
            status="committed" if sync else "queued",
            native_ids=native_ids,
            latency_ms=latency,
            trace=trace,
        )
