"""The plugin state its parts share (recall, delivery, reports), declared once.

``MemoryPlugin.__init__`` sets every attribute; the methods listed for the type checker
are provided by ``MemoryPlugin`` or by one of the other parts."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import MemoryAdapter, MemoryScope
from nanobot_memory_adapters.nanobot.people import Attribution, People
from nanobot_memory_adapters.nanobot.settings import LoadedSettings
from nanobot_memory_adapters.nanobot.state import (
    Activity,
    CacheEntry,
    KnownHealth,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.store_lock import StoreLockNotice
from nanobot_memory_adapters.nanobot.turn_line import RecallNote
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns

if TYPE_CHECKING:
    from nanobot_memory_adapters.nanobot.outbox import Outbox


class PluginState:
    loop: Any
    sessions: Any
    status: str
    reason: str
    provider: str
    read_only: bool
    data_dir: Path | None
    settings: LoadedSettings
    adapter: MemoryAdapter | None
    cache: OrderedDict[str, CacheEntry]
    people: People
    retrieve_stats: LatencyStats
    record_stats: LatencyStats
    enqueue_stats: LatencyStats
    last_error: LastError | None
    writes_failing_since: float | None
    reads_failing_since: float | None
    store_lock: StoreLockNotice
    _closed: bool
    _retry_task: asyncio.Task[Any] | None
    _retry_delay: float
    _unsettled: dict[str, int]
    _settled: asyncio.Condition | None
    unqueued: UnqueuedTurns
    _recovered: bool
    _exit_deadline: float | None
    _exit_timeouts: set[asyncio.Timeout]
    _left_said: bool
    activity: Activity | None
    last_recall: RecallNote | None
    recall_notes: dict[str, RecallNote]
    known_health: KnownHealth | None
    _health_task: asyncio.Task[Any] | None
    _build_task: asyncio.Task[bool] | None

    if TYPE_CHECKING:
        @property
        def outbox(self) -> Outbox: ...
        def _lock(self) -> asyncio.Lock: ...
        def _writes_lock(self) -> asyncio.Lock: ...
        def _note_error(self, operation: str, exc: BaseException, *, retryable: bool) -> None: ...
        def _note_read_failure(self, operation: str, exc: Any, timed_out: str) -> None: ...
        async def _ensure_adapter(self) -> bool: ...
        async def _ensure_scope(self, scope: MemoryScope) -> None: ...
        async def _attribute(self, *, session_key: str, channel: str, chat_id: str,
                             sender_id: str | None, metadata: dict[str, Any] | None
                             ) -> Attribution: ...
        async def _wait_for_own_writes(self, session_key: str, timeout_s: float) -> None: ...
