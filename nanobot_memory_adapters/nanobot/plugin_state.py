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
from nanobot_memory_adapters.nanobot.audience import Audience
from nanobot_memory_adapters.nanobot.chat_book import CHATS_FILE, ChatBook
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.people import Attribution, attribute, observe
from nanobot_memory_adapters.nanobot.settings import LoadedSettings, data_dir_for
from nanobot_memory_adapters.nanobot.state import (
    OUTBOX_FILE,
    Activity,
    CacheEntry,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.store_lock import StoreLockNotice
from nanobot_memory_adapters.nanobot.turns import chat_scope
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns


@dataclass(eq=False, repr=False)
class HealthState:
    """How the provider is doing: latencies, the last error, since when reads or writes
    fail, the store-lock notice and what the backend is busy with. Recall and delivery
    note into it; the reports (``/memory-health``, the turn line, status) read it."""

    retrieve_stats: LatencyStats = field(default_factory=LatencyStats)
    record_stats: LatencyStats = field(default_factory=LatencyStats)
    enqueue_stats: LatencyStats = field(default_factory=LatencyStats)
    last_error: LastError | None = None
    writes_failing_since: float | None = None
    reads_failing_since: float | None = None
    # "another process holds the store", said once
    store_lock: StoreLockNotice = field(default_factory=StoreLockNotice)
    activity: Activity | None = None  # what the backend is busy with, if anything

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
    # what turns showed about each session (who may read it), kept on disk
    opened_book: ChatBook | None = None
    # each session's current turn and its audience (turn id, audience), for the
    # synchronous prompt build of that same turn
    audiences: OrderedDict[str, tuple[str | None, Audience]] = field(
        default_factory=OrderedDict[str, tuple[str | None, Audience]])
    # turns the outbox could not take yet (kept in order, retried)
    unqueued: UnqueuedTurns = field(default_factory=UnqueuedTurns)
    # how the provider is doing (what /memory-health and the turn line report)
    health: HealthState = field(default_factory=lambda: HealthState())
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

    @property
    def group_scope(self) -> bool:
        """``group_recall: group``: a shared chat reads and writes its own scope."""
        return self.settings.plugin.group_recall == "group"

    @property
    def book(self) -> ChatBook:
        """The chat book, in the data directory the plugin started with (it is about
        chats, not providers: a switch keeps it)."""
        if self.opened_book is None:
            base = self.data_dir or data_dir_for(self.settings)
            self.opened_book = ChatBook(base / CHATS_FILE)
        return self.opened_book

    async def attribute(self, *, session_key: str, channel: str, chat_id: str,
                        sender_id: str | None, metadata: dict[str, Any] | None
                        ) -> Attribution:
        """Whose turn this is: this turn's observation merged into the session's facts on
        disk (``chat_book``), then ``people.attribute`` (recall, search, delivery alike)."""
        seen = observe(session_key=session_key, channel=channel, chat_id=chat_id,
                       sender_id=sender_id, metadata=metadata,
                       direct_chats=self.settings.plugin.direct_chats)
        facts = await asyncio.to_thread(self.book.observe, session_key, seen)
        return attribute(facts, seen, session_key=session_key, chat_id=chat_id,
                         group_scope=self.group_scope)

    def audience_of(self, who: Attribution, *, channel: str, chat_id: str, session_key: str,
                    attributes: dict[str, Any] | None) -> Audience:
        """Whose memory may reach this turn's request and reply: the turn's own scope in a
        one-person chat; in a shared (or unknown) chat only what ``group_recall`` allows
        (``group``: the chat's own scope; ``personal``: the speaker's; ``none``: nothing)."""
        memory = self.settings.memory
        if memory is None or who.person is None:
            return Audience.nobody()
        if who.shared and self.settings.plugin.group_recall == "none":
            return Audience.nobody()
        try:
            scope = chat_scope(memory, channel=channel, chat_id=chat_id, sender_id=who.person,
                               session_key=session_key, attributes=attributes)[0]
        except ValueError:
            return Audience.nobody()
        return Audience(frozenset({scope.key}), one_person=not who.shared)

    def note_audience(self, session_key: str, turn_id: str | None, audience: Audience) -> None:
        self.audiences[session_key] = (turn_id, audience)
        self.audiences.move_to_end(session_key)
        while len(self.audiences) > 4096:
            self.audiences.popitem(last=False)

    def audience_now(self, session_key: str, turn_id: str | None) -> Audience:
        """The audience noted for this very turn (no I/O); nobody when this turn was not
        seen (fails closed)."""
        noted = self.audiences.get(session_key)
        if noted is None or noted[0] != turn_id:
            return Audience.nobody()
        return noted[1]


#: The plugin's "build the provider once, retry later" (True when it is ready).
EnsureAdapter = Callable[[], Awaitable[bool]]
#: The plugin's "set this scope up in the provider once".
EnsureScope = Callable[[MemoryScope], Awaitable[None]]
