"""The state the plugin's collaborators share, in one object the plugin owns.

``MemoryPlugin`` builds one ``PluginState`` and hands it to its collaborators (``Recall``,
``Delivery``, ``Reports``, ``Forget``, ``Backfill``); state only one of them uses lives
in that collaborator."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.contract import AdapterError, MemoryAdapter, MemoryScope
from nanobot_memory_adapters.diagnostics import mentions_lock_contention
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.people import Attribution, People, attribute, is_person
from nanobot_memory_adapters.nanobot.settings import LoadedSettings, data_dir_for
from nanobot_memory_adapters.nanobot.state import (
    OUTBOX_FILE,
    Activity,
    CacheEntry,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.store_lock import StoreLockNotice
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns


@dataclass(eq=False, repr=False)
class PluginState:
    """What the provider is, how it is doing, and the plugin's shared queues and locks
    (no generated ``__eq__``/``__repr__``: one live object, whose repr would print the
    settings, the cache and queued turns)."""

    loop: Any
    sessions: Any
    settings: LoadedSettings
    status: str = "unconfigured"  # unconfigured | disabled | passthrough | active
    reason: str = ""
    provider: str = ""
    read_only: bool = False
    # the plugin's own memory-context skill is in the workspace (not a user's file of
    # that name): only then does the guidance point the model to it
    skill_listed: bool = False
    data_dir: Path | None = None
    adapter: MemoryAdapter | None = None
    closed: bool = False
    retry_delay: float = 1.0  # the next backoff (provider build and delivery alike)
    cache: OrderedDict[str, CacheEntry] = field(default_factory=OrderedDict[str, CacheEntry])
    people: People = field(default_factory=People)
    # turns the outbox could not take yet (kept in order, retried)
    unqueued: UnqueuedTurns = field(default_factory=UnqueuedTurns)
    retrieve_stats: LatencyStats = field(default_factory=LatencyStats)
    record_stats: LatencyStats = field(default_factory=LatencyStats)
    enqueue_stats: LatencyStats = field(default_factory=LatencyStats)
    last_error: LastError | None = None
    writes_failing_since: float | None = None
    reads_failing_since: float | None = None
    # "another process holds the store", said once
    store_lock: StoreLockNotice = field(default_factory=StoreLockNotice)
    activity: Activity | None = None  # what the backend is busy with, if anything
    opened_outbox: Outbox | None = None
    drain_lock: asyncio.Lock | None = None
    write_lock: asyncio.Lock | None = None

    @property
    def outbox(self) -> Outbox:
        if self.opened_outbox is None:
            base = self.data_dir or data_dir_for(self.settings)
            self.opened_outbox = Outbox(base / OUTBOX_FILE,
                                        keep_delivered=self.settings.plugin.keep_delivered)
        return self.opened_outbox

    def draining(self) -> asyncio.Lock:
        """This process's delivery lock (delivery, forget, backfill, a switch)."""
        if self.drain_lock is None:
            self.drain_lock = asyncio.Lock()
        return self.drain_lock

    def writing(self) -> asyncio.Lock:
        """This process's lock on putting kept turns into the outbox."""
        if self.write_lock is None:
            self.write_lock = asyncio.Lock()
        return self.write_lock

    def note_error(self, operation: str, exc: BaseException, *, retryable: bool) -> None:
        message = str(exc) or type(exc).__name__
        self.last_error = LastError(time.time(), operation, message[:1000], retryable,
                                    store_locked=mentions_lock_contention(exc))

    def note_read_failure(
        self, operation: str, exc: AdapterError | TimeoutError, timed_out: str
    ) -> None:
        """A failed read: noted (a bare timeout as ``timed_out``); a retryable one (a
        timeout or a retryable AdapterError) starts the reads-failing clock."""
        retryable = isinstance(exc, TimeoutError) or exc.retryable
        self.note_error(operation, exc if str(exc) else TimeoutError(timed_out),
                        retryable=retryable)
        if retryable and self.reads_failing_since is None:
            self.reads_failing_since = time.time()

    @property
    def group_scope(self) -> bool:
        """``group_recall: group``: a shared chat reads and writes its own scope."""
        return self.settings.plugin.group_recall == "group"

    async def attribute(self, *, session_key: str, channel: str, chat_id: str,
                        sender_id: str | None, metadata: dict[str, Any] | None
                        ) -> Attribution:
        """``people.attribute`` with the outbox's record of the session's sender (from an
        earlier process) for turns from no person (recall and delivery alike)."""
        remembered = None
        if not is_person(sender_id, metadata, session_key) and self.people.last(session_key) \
                is None:
            try:
                known = await asyncio.to_thread(self.outbox.identity, session_key)
            except Exception:  # an unreadable outbox: nobody is remembered
                known = None
            remembered = known[2] if known else None
        return attribute(self.people, session_key=session_key, channel=channel,
                         chat_id=chat_id, sender_id=sender_id, metadata=metadata,
                         remembered=remembered, group_scope=self.group_scope)


#: The plugin's "build the provider once, retry later" (True when it is ready).
EnsureAdapter = Callable[[], Awaitable[bool]]
#: The plugin's "set this scope up in the provider once".
EnsureScope = Callable[[MemoryScope], Awaitable[None]]
