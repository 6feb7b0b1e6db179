"""The state the plugin's collaborators share, in one object the plugin owns.

``MemoryPlugin`` builds one ``PluginState`` and hands it to its collaborators (``Recall``,
``Delivery``, ``Reports``, ``Forget``, ``Backfill``); state only one of them uses lives
in that collaborator, and each concern several use has its own typed object here:
``HealthState`` (how the provider is doing), ``audiences.Audiences`` (who may read what)
and ``queues.TurnQueues`` (where kept turns wait)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.contract import AdapterError, MemoryAdapter, MemoryScope
from nanobot_memory_adapters.diagnostics import mentions_lock_contention
from nanobot_memory_adapters.nanobot.audiences import Audiences
from nanobot_memory_adapters.nanobot.queues import TurnQueues
from nanobot_memory_adapters.nanobot.settings import LoadedSettings, data_dir_for
from nanobot_memory_adapters.nanobot.state import (
    Activity,
    CacheEntry,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.store_lock import StoreLockNotice


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
    """What the provider is and the collaborators' own typed states (``health``,
    ``audiences``, ``queues``), handed to every collaborator (no generated
    ``__eq__``/``__repr__``: one live object, whose repr would print the settings, the
    cache and queued turns)."""

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
    # how the provider is doing (what /memory-health and the turn line report)
    health: HealthState = field(default_factory=lambda: HealthState())
    # who may read what: the chat book and each session's current audience
    audiences: Audiences = field(init=False)
    # where kept turns wait: the outbox, the turns it could not take yet, the locks
    queues: TurnQueues = field(init=False)

    def __post_init__(self) -> None:
        def base() -> Path:
            return self.data_dir or data_dir_for(self.settings)

        self.audiences = Audiences(lambda: self.settings, base)
        self.queues = TurnQueues(base, lambda: self.settings.plugin.keep_delivered)


#: The plugin's "build the provider once, retry later" (True when it is ready).
EnsureAdapter = Callable[[], Awaitable[bool]]
#: The plugin's "set this scope up in the provider once".
EnsureScope = Callable[[MemoryScope], Awaitable[None]]
