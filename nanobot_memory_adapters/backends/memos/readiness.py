"""MemOS readiness: its scheduler's task status (Redis-backed), per user."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nanobot_memory_adapters.backends.memos.config import (
    TERMINAL,
    MemOSConfig,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
    Readiness,
)


class MemOSReadiness:
    """MemOS's scheduler task status for a scope's user (the store's ``readiness``, which
    the wrapper polls). It reaches the server through the store's native ids and HTTP
    requests, and remembers whether the server has its Redis queue."""

    def __init__(
        self,
        config: MemOSConfig,
        *,
        native_ids: Callable[[MemoryScope, str], dict[str, str]],
        request: Callable[..., Awaitable[dict[str, Any]]],
    ) -> None:
        self.config = config
        self.native_ids = native_ids
        self._request = request
        self._redis: bool | None = None

    async def queue_available(self) -> bool:
        """Whether MemOS's scheduler queue (Redis) can report task status."""
        if self._redis is None:
            try:
                await self._request(
                    "readiness",
                    "GET",
                    "/product/scheduler/task_queue_status",
                    params={"user_id": "nbm-probe"},
                    ok_codes=(200, 404),
                )
                self._redis = True
            except AdapterError as exc:
                if exc.raw.get("status_code") == 503 or (
                    isinstance(exc.raw.get("body"), dict) and exc.raw["body"].get("code") == 503
                ):
                    self._redis = False
                else:
                    raise
        return self._redis

    async def readiness(self, scope: MemoryScope) -> Readiness:
        ids = self.native_ids(scope, "readiness")
        if not await self.queue_available():
            return Readiness(
                status="unknown",
                detail="MemOS runs without its Redis scheduler queue: task status is not "
                "reported (start the server with --redis)",
            )
        result = await self._request(
            "readiness", "GET", "/product/scheduler/status", params={"user_id": ids["user_id"]})
        tasks = result.get("data") or []
        open_tasks = [t for t in tasks if str(t.get("status", "")).lower() not in TERMINAL]
        failed = [t for t in tasks if str(t.get("status", "")).lower() == "failed"]
        detail = f"{len(tasks)} scheduler tasks for {ids['user_id']}"
        if failed:
            detail += f", {len(failed)} failed"
        return Readiness(
            status="pending" if open_tasks else "ready",
            pending_count=len(open_tasks),
            detail=detail,
        )
