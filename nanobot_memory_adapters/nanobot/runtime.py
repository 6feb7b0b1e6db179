"""The plugin at run time: one provider, per-session recall cache, outbox-backed writes.

Read path: before each user turn nanobot awaits the plugin's runtime-context provider;
the plugin retrieves from the provider with the user's text as the query (bounded by
``recall_timeout_s``) and caches the formatted ``<memory-context>`` per session. The
synchronous system-prompt build then reads that cache through ``MemoryView`` — no I/O.

Write path: when nanobot reports ``SessionTurnPersisted`` the turn becomes a
``MemoryEvent``, is appended to the SQLite outbox (a local durable append), and a
background pass (tracked by nanobot, flushed by ``AgentLoop.aclose``) delivers pending
events in order. The reply never waits for the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger
from pydantic import ValidationError

from nanobot_memory_adapters.config import ConfigError, _suggest, validation_to_config_error
from nanobot_memory_adapters.contract import (
    AdapterError,
    AdapterMode,
    MemoryAdapter,
    MemoryScope,
    RetrieveRequest,
    capabilities_of,
)
from nanobot_memory_adapters.nanobot import seams, skill
from nanobot_memory_adapters.nanobot.outbox import Outbox, OutboxRow
from nanobot_memory_adapters.nanobot.settings import (
    LoadedSettings,
    data_dir_for,
    load_settings,
    parse_settings,
    settings_path,
    split_file,
    with_plugin_option,
    with_provider,
    write_settings,
)
from nanobot_memory_adapters.nanobot.turns import (
    as_of_from,
    build_event,
    identity_values,
    scope_for,
    tags_from,
)

LOG = seams.LOG_PREFIX
PASSTHROUGH = "rolling_summary"  # nanobot's own file memory: the plugin stays out of the way
OUTBOX_FILE = "nanobot-outbox.sqlite3"
_CACHE_SESSIONS = 512

_plugins: weakref.WeakKeyDictionary[Any, MemoryPlugin] = weakref.WeakKeyDictionary()


def plugin_for(loop: Any) -> MemoryPlugin | None:
    """The plugin attached to an AgentLoop (tests, the SDK, diagnostics)."""
    return _plugins.get(loop)


class LatencyStats:
    def __init__(self, size: int = 1000) -> None:
        self.samples: deque[float] = deque(maxlen=size)

    def add(self, ms: float) -> None:
        self.samples.append(ms)

    def percentile(self, p: float) -> float | None:
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
        return ordered[rank]

    def line(self) -> str:
        if not self.samples:
            return "no samples yet"
        return (f"p50 {self.percentile(50):.1f} ms, p95 {self.percentile(95):.1f} ms "
                f"(n={len(self.samples)})")


@dataclass
class CacheEntry:
    text: str
    scope_key: str
    provider: str
    at: float
    query: str
    stale: bool = False


@dataclass
class LastError:
    at: float
    operation: str
    message: str
    retryable: bool


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    secs = max(0.0, time.time() - ts)
    if secs < 120:
        return f"{secs:.0f}s ago"
    if secs < 7200:
        return f"{secs / 60:.0f}m ago"
    return f"{secs / 3600:.1f}h ago"


class MemoryPlugin:
    """Everything the plugin does inside one AgentLoop."""

    def __init__(self, loop: Any, *, sessions: Any, bus: Any, workspace: Path,
                 provided: Any = None) -> None:
        self.loop = loop
        self.sessions = sessions
        self.bus = bus
        self.workspace = Path(workspace)
        config_dir = seams.config_dir_of(sessions) or seams.default_config_dir()
        self.settings_path = settings_path(config_dir)
        # A provider handed in by the embedding program (nanobot.tool.provided_memory):
        # described by its own settings, used as it is, never closed here.
        self._owns_adapter = provided is None
        if provided is not None:
            self.settings_path = self.workspace / "memory.json"
            self.settings: LoadedSettings = parse_settings(self.settings_path,
                                                           provided.settings)
        else:
            self.settings = load_settings(self.settings_path)
        self.status = "unconfigured"  # unconfigured | disabled | passthrough | active
        self.reason = ""
        self.adapter: MemoryAdapter | None = None
        self.provider = ""
        self.read_only = False
        self.data_dir: Path | None = None
        self._outbox: Outbox | None = None
        self.cache: OrderedDict[str, CacheEntry] = OrderedDict()
        self.retrieve_stats = LatencyStats()
        self.record_stats = LatencyStats()
        self.enqueue_stats = LatencyStats()
        self.last_error: LastError | None = None
        self.writes_failing_since: float | None = None
        self.reads_failing_since: float | None = None
        self._build_failed_at: float | None = None
        self._scopes_ready: set[str] = set()
        self._build_task: asyncio.Task[bool] | None = None
        self._drain_lock: asyncio.Lock | None = None
        self._retry_task: asyncio.Task[Any] | None = None
        self._retry_delay = 1.0
        self._unsubscribe: list[Any] = []
        self._closed = False
        # Turns this process queued and not yet settled, per session (read-your-writes).
        self._unsettled: dict[str, int] = {}
        self._settled: asyncio.Condition | None = None
        self._apply_settings()
        if provided is not None and self.status == "active":
            self.adapter = provided.adapter
        _plugins[loop] = self

    # -- lifecycle ---------------------------------------------------------------------
    def _apply_settings(self) -> None:
        """Decide the status from memory.json (sync, cheap, never raises)."""
        s = self.settings
        self.read_only = s.plugin.read_only
        self._retry_delay = s.plugin.retry_initial_s
        if not s.exists:
            self.status, self.provider = "unconfigured", ""
            self.reason = (f"no {s.path.name} at {s.path}; nanobot's own memory (MEMORY.md) "
                           "is in use")
            logger.debug("{}: {}", LOG, self.reason)
        elif s.error or s.memory is None:
            self._disable(s.error or "memory config could not be read")
        elif not s.memory.enabled:
            self.status, self.provider = "disabled", s.memory.provider_name
            self.reason = f'"enabled": false in {s.path}; nanobot\'s own memory is in use'
            logger.info("{}: memory disabled — {}", LOG, self.reason)
        elif s.memory.provider_name == PASSTHROUGH and self._owns_adapter:
            # In a user's nanobot, rolling_summary *is* nanobot's own memory: hands off. A
            # provided instance (the benchmark's) is served through the slot like any other.
            self.status, self.provider = "passthrough", PASSTHROUGH
            self.reason = ("rolling_summary: nanobot's own MEMORY.md, history.jsonl and Dream "
                           "are in charge; the plugin is passive")
            logger.debug("{}: {}", LOG, self.reason)
        else:
            problem = self._check_block(s)
            if problem:
                self._disable(problem)
            else:
                self.status, self.provider = "active", s.memory.provider_name
                self.reason = ""
                self.data_dir = data_dir_for(s)
                logger.debug("{}: memory provider '{}' selected (config {}, data {})",
                            LOG, self.provider, s.path, self.data_dir)
        self._sync_skill()

    def _disable(self, why: str) -> None:
        self.status, self.reason = "disabled", why
        logger.error("{}: memory disabled — {} (fix {}); nanobot keeps running with its own "
                     "memory", LOG, why, self.settings.path)

    @staticmethod
    def _check_block(s: LoadedSettings) -> str | None:
        """Validate the provider's own block now, so a mistake is reported at startup."""
        from nanobot_memory_adapters.registry import provider_class, resolve_config

        assert s.memory is not None
        try:
            _config, spec = resolve_config(s.memory)
            cls = provider_class(spec)
            cls.config_model.model_validate(s.memory.provider_block())
        except ConfigError as exc:
            return str(exc)
        except ValidationError as exc:
            return str(validation_to_config_error(exc, prefix=f"memory.{s.memory.provider_name}"))
        except ImportError as exc:
            return f"memory.{s.memory.provider_name}: cannot import provider ({exc})"
        except Exception as exc:  # a provider module that fails to import for other reasons
            return f"memory.{s.memory.provider_name}: {type(exc).__name__}: {exc}"
        return None

    def _sync_skill(self) -> None:
        if self.status == "active" and self.settings.plugin.install_skill:
            skill.install_skill(self.workspace)
        else:
            skill.remove_skill(self.workspace)

    def attach(self) -> None:
        """Hook into the loop: prompt memory view, per-turn recall, turn writes, commands."""
        from nanobot.bus.runtime_events import SessionTurnPersisted

        seams.install_memory_view(self.loop, self.text_for_prompt)
        self._unsubscribe.append(self.loop.register_runtime_context_provider(self.provide))
        self._unsubscribe.append(self.bus.subscribe(self.on_turn_persisted, SessionTurnPersisted))

    @property
    def outbox(self) -> Outbox:
        if self._outbox is None:
            base = self.data_dir or data_dir_for(self.settings)
            self._outbox = Outbox(base / OUTBOX_FILE,
                                  keep_delivered=self.settings.plugin.keep_delivered)
        return self._outbox

    def _lock(self) -> asyncio.Lock:
        if self._drain_lock is None:
            self._drain_lock = asyncio.Lock()
        return self._drain_lock

    async def _ensure_adapter(self) -> bool:
        """The provider is built once, in a task a timed-out caller cannot cancel."""
        if self.status != "active" or self._closed:
            return False
        if self.adapter is not None:
            return True
        task = self._build_task
        if task is None or task.done():
            if (self._build_failed_at is not None
                    and time.time() - self._build_failed_at < self._retry_delay):
                return False
            task = self._build_task = asyncio.get_running_loop().create_task(
                self._build_adapter())
        return await asyncio.shield(task)

    async def _build_adapter(self) -> bool:
        memory = self.settings.memory
        assert memory is not None
        provider = self.provider
        try:
            adapter = await asyncio.to_thread(self._build, memory)
        except (ConfigError, ImportError, ValidationError) as exc:
            self._disable(str(exc))
            self._sync_skill()
            return False
        except Exception as exc:  # the backend itself is down: keep events, retry later
            self._build_failed_at = time.time()
            self._note_error("build_provider", exc, retryable=True)
            logger.warning("{}: provider '{}' not available yet: {}", LOG, provider, exc)
            return False
        if (self._closed or self.status != "active" or self.provider != provider
                or self.adapter is not None):
            await adapter.aclose()  # closed or switched meanwhile
            return self.adapter is not None
        self._build_failed_at = None
        if self.read_only:
            await adapter.set_mode(AdapterMode(read_only=True, reason="nanobot read-only"))
        self.adapter = adapter
        self._scopes_ready = set()
        logger.debug("{}: memory provider '{}' ready", LOG, provider)
        # Events left by an earlier process (or an outage) go out now.
        self._schedule_drain()
        return True

    def _build(self, memory: Any) -> MemoryAdapter:
        from nanobot_memory_adapters.registry import load_provider

        return load_provider(memory, data_dir=self.data_dir)

    async def _ensure_scope(self, scope: MemoryScope) -> None:
        assert self.adapter is not None
        if scope.key in self._scopes_ready:
            return
        await self.adapter.setup_scope(scope)
        self._scopes_ready.add(scope.key)

    async def aclose(self) -> None:
        """Release the provider (embedded stores hold file locks) and the outbox."""
        self._closed = True
        for unsubscribe in self._unsubscribe:
            with contextlib.suppress(Exception):
                unsubscribe()
        self._unsubscribe.clear()
        if self._retry_task is not None:
            self._retry_task.cancel()
            with contextlib.suppress(BaseException):
                await self._retry_task
            self._retry_task = None
        if self._drain_lock is not None:
            async with self._drain_lock:
                await self._close_adapter()
        else:
            await self._close_adapter()
        if self._outbox is not None:
            self._outbox.close()
            self._outbox = None

    async def _close_adapter(self) -> None:
        adapter, self.adapter = self.adapter, None
        if adapter is not None and self._owns_adapter:
            try:
                await adapter.aclose()
            except Exception as exc:
                logger.warning("{}: closing '{}' failed: {}", LOG, adapter.backend_name, exc)

    # -- errors ------------------------------------------------------------------------
    def _note_error(self, operation: str, exc: BaseException, *, retryable: bool) -> None:
        message = str(exc) or type(exc).__name__
        self.last_error = LastError(time.time(), operation, message[:1000], retryable)

    def _note_read_failure(
        self, operation: str, exc: AdapterError | TimeoutError, timed_out: str
    ) -> None:
        """A failed read: noted (a bare timeout as ``timed_out``); a retryable one (a
        timeout or a retryable AdapterError) starts the reads-failing clock."""
        retryable = isinstance(exc, TimeoutError) or exc.retryable
        self._note_error(operation, exc if str(exc) else TimeoutError(timed_out),
                         retryable=retryable)
        if retryable and self.reads_failing_since is None:
            self.reads_failing_since = time.time()

    # -- read path -----------------------------------------------------------------------
    def text_for_prompt(self) -> str | None:
        """Sync, no I/O: the cached context for the current session, or None for MEMORY.md.

        With ``context_placement: user_message`` the memory slot stays empty (the context
        travels in the user message instead; MEMORY.md is still not shown)."""
        if self.status != "active":
            return None
        key = seams.current_session_key()
        if not key or key.startswith("dream:"):
            return None
        if self.settings.plugin.context_placement == "user_message":
            return ""
        entry = self.cache.get(key)
        return entry.text if entry is not None else ""

    async def provide(self, request: Any) -> Any:
        """nanobot's per-turn runtime-context hook: retrieve now, serve from the cache.

        ``system_prompt`` placement (default) returns no block: the context goes into the
        system prompt's memory slot (replacing MEMORY.md) through ``text_for_prompt``.
        ``user_message`` placement returns it as a runtime-context block, which nanobot
        appends to the user message after everything stable (system prompt, tools,
        history); the turn recorder strips such blocks, so memory never re-enters memory.
        """
        entry = None
        try:
            entry = await self.recall(
                session_key=request.session_key,
                query=request.original_user_text,
                channel=request.channel,
                chat_id=request.chat_id,
                sender_id=request.sender_id,
                attributes=request.attributes,
            )
        except Exception as exc:  # a memory problem must never fail the turn
            self._note_error("retrieve", exc, retryable=False)
            logger.exception("{}: recall failed", LOG)
        if (self.settings.plugin.context_placement == "user_message" and entry is not None
                and entry.text):
            return seams.runtime_context_block(entry.text)
        return None

    async def recall(
        self, *, session_key: str | None, query: str | None, channel: str, chat_id: str,
        sender_id: str | None, attributes: dict[str, Any] | None = None,
    ) -> CacheEntry | None:
        if self.status != "active" or not session_key or session_key.startswith("dream:"):
            return None
        if not query or not query.strip():
            return None  # system turns keep the session's last context
        if not seams.session_persists(self.sessions, session_key):
            return None  # nanobot shows no long-term memory to ephemeral sessions
        memory = self.settings.memory
        assert memory is not None
        values = identity_values(channel=channel, chat_id=chat_id, sender_id=sender_id,
                                 session_key=session_key, attributes=attributes)
        try:
            scope, session_id = scope_for(memory, values)
        except ValueError as exc:
            self._note_error("scope", exc, retryable=False)
            self.cache.pop(session_key, None)
            return None
        previous = self.cache.get(session_key)
        entry: CacheEntry
        if not await self._ready_for(scope):
            entry = self._stale(previous, scope, query)
        else:
            assert self.adapter is not None
            request = RetrieveRequest(
                query=query, scope=scope, session_id=session_id,
                budget=memory.budget.to_budget(), as_of=as_of_from(attributes),
                **tags_from(attributes),
            )
            await self._wait_for_own_writes(session_key, self.settings.plugin.read_your_writes_s)
            started = time.perf_counter()
            try:
                result = await asyncio.wait_for(
                    self.adapter.retrieve(request), self.settings.plugin.recall_timeout_s
                )
            except (AdapterError, TimeoutError) as exc:
                self._note_read_failure("retrieve", exc, f"retrieve took longer than "
                                        f"{self.settings.plugin.recall_timeout_s}s")
                logger.warning("{}: retrieve from '{}' failed ({}); answering with {} memory",
                               LOG, self.provider, exc or "timeout",
                               "stale" if previous else "no")
                entry = self._stale(previous, scope, query)
            else:
                self.retrieve_stats.add((time.perf_counter() - started) * 1000)
                self.reads_failing_since = None
                text = result.formatted_context or ""
                entry = CacheEntry(text, scope.key, self.provider, time.time(), query)
        self.cache[session_key] = entry
        self.cache.move_to_end(session_key)
        while len(self.cache) > _CACHE_SESSIONS:
            self.cache.popitem(last=False)
        return entry

    async def _ready_for(self, scope: MemoryScope) -> bool:
        """Provider built and scope set up (a startup cost, under ``startup_timeout_s``)."""
        try:
            async with asyncio.timeout(self.settings.plugin.startup_timeout_s):
                if not await self._ensure_adapter():
                    return False
                await self._ensure_scope(scope)
            return True
        except (AdapterError, TimeoutError) as exc:
            self._note_read_failure("setup_scope", exc, f"provider start took longer than "
                                    f"{self.settings.plugin.startup_timeout_s}s")
            return False

    def _stale(self, previous: CacheEntry | None, scope: MemoryScope, query: str) -> CacheEntry:
        if previous and previous.scope_key == scope.key and previous.provider == self.provider:
            return CacheEntry(previous.text, previous.scope_key, previous.provider,
                              previous.at, previous.query, stale=True)
        return CacheEntry("", scope.key, self.provider, time.time(), query, stale=True)

    # -- write path ----------------------------------------------------------------------
    async def on_turn_persisted(self, event: Any) -> None:
        """Bus subscriber: durable local append, then background delivery. Never raises."""
        try:
            await self._record_turn(event)
        except Exception as exc:
            self._note_error("enqueue", exc, retryable=False)
            logger.exception("{}: could not queue the turn for memory", LOG)

    async def _record_turn(self, event: Any) -> None:
        if self.status != "active":
            return
        ctx = event.context
        key = ctx.session_key
        if not key or key.startswith("dream:"):
            return
        if self.read_only:
            logger.debug("{}: read-only, turn {} not recorded", LOG, event.turn_id)
            return
        session = seams.session_of(self.sessions, key)
        if session is None:
            return
        memory = self.settings.memory
        assert memory is not None
        try:
            memory_event = build_event(
                memory=memory, messages=list(session.messages), turn_id=event.turn_id,
                channel=ctx.channel, chat_id=ctx.chat_id, sender_id=event.sender_id,
                session_key=key, attributes=ctx.attributes,
                include_tools=self.settings.plugin.include_tool_messages,
            )
        except ValueError as exc:  # a scope template or id the backend must not see
            self._note_error("build_event", exc, retryable=False)
            logger.warning("{}: turn {} not recorded: {}", LOG, event.turn_id, exc)
            return
        if memory_event is None:
            return  # a slash command or nothing the user said
        started = time.perf_counter()
        added = await asyncio.to_thread(self.outbox.enqueue, self.provider, memory_event, key)
        self.enqueue_stats.add((time.perf_counter() - started) * 1000)
        if added:
            self._unsettled[key] = self._unsettled.get(key, 0) + 1
        self._schedule_drain()

    def _schedule_drain(self) -> None:
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        seams.schedule_background(self.loop, self._drain())

    def _schedule_retry(self) -> None:
        if self._closed:
            return
        if self._retry_task is not None and not self._retry_task.done():
            return
        delay = self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, self.settings.plugin.retry_max_s)

        async def later() -> None:
            await asyncio.sleep(delay)
            self._retry_task = None
            await self._drain()

        # Not tracked by nanobot: shutdown must not wait out a backoff sleep.
        self._retry_task = asyncio.get_running_loop().create_task(later())

    async def _drain(self) -> None:
        """Deliver pending events in order until the outbox is empty or the backend fails."""
        if self.status != "active" or self.read_only or self._closed:
            return
        drain_lock = self._lock()
        async with drain_lock:
            if self.status != "active" or self.read_only:
                return
            if not await self._ensure_adapter():
                if self.status == "active":
                    self._schedule_retry()
                return
            provider = self.provider
            with self.outbox.drain_lock() as mine:
                if not mine:  # another process is draining this outbox
                    self._schedule_retry()
                    return
                while True:
                    rows = await asyncio.to_thread(self.outbox.pending, provider, 50)
                    if not rows:
                        break
                    for row in rows:
                        if (self.read_only or self.provider != provider or self.adapter is None
                                or self._closed):
                            return
                        if not await self._deliver(row):
                            self._schedule_retry()
                            return
            self._retry_delay = self.settings.plugin.retry_initial_s
            self.writes_failing_since = None

    async def _deliver(self, row: OutboxRow) -> bool:
        """True when the row is settled (delivered or parked); False to stop and retry later."""
        assert self.adapter is not None
        event = row.event()
        started = time.perf_counter()
        try:
            await self._ensure_scope(event.scope())
            receipt = await asyncio.wait_for(
                self.adapter.record_event(event), self.settings.plugin.write_timeout_s
            )
        except TimeoutError:
            error = f"record_event took longer than {self.settings.plugin.write_timeout_s}s"
            return await self._write_failed(row, TimeoutError(error), retryable=True)
        except AdapterError as exc:
            return await self._write_failed(row, exc, retryable=exc.retryable)
        except Exception as exc:
            return await self._write_failed(row, exc, retryable=False)
        if not receipt.accepted:  # e.g. skipped_read_only: not accepted, keep it
            await asyncio.to_thread(self.outbox.mark_retry, row.seq,
                                    f"backend returned {receipt.status}")
            return False
        latency = (time.perf_counter() - started) * 1000
        self.record_stats.add(latency)
        await asyncio.to_thread(self.outbox.mark_delivered, row.seq, status=receipt.status,
                                native_ids=receipt.native_ids, latency_ms=latency)
        self.writes_failing_since = None
        await self._settle(row)
        return True

    def _condition(self) -> asyncio.Condition:
        if self._settled is None:
            self._settled = asyncio.Condition()
        return self._settled

    async def _settle(self, row: OutboxRow) -> None:
        key = row.session_key
        if self._unsettled.get(key):
            self._unsettled[key] -= 1
            if not self._unsettled[key]:
                del self._unsettled[key]
        async with self._condition():
            self._condition().notify_all()

    async def _wait_for_own_writes(self, session_key: str, timeout_s: float) -> None:
        """Let this session's just-queued turns land first, when the backend is healthy."""
        if (timeout_s <= 0 or not self._unsettled.get(session_key) or self.read_only
                or self.writes_failing_since is not None):
            return
        condition = self._condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), condition:
                await condition.wait_for(
                    lambda: not self._unsettled.get(session_key)
                    or self.writes_failing_since is not None
                )

    async def _write_failed(self, row: OutboxRow, exc: BaseException, *, retryable: bool) -> bool:
        detail = exc.to_dict() if isinstance(exc, AdapterError) else {"message": str(exc)}
        error = json.dumps(detail, default=str)[:4000]
        self._note_error("record_event", exc, retryable=retryable)
        if retryable:
            if self.writes_failing_since is None:
                self.writes_failing_since = time.time()
            await asyncio.to_thread(self.outbox.mark_retry, row.seq, error)
            logger.warning("{}: '{}' did not accept event {} ({}); kept in the outbox, "
                           "retrying in {:.1f}s", LOG, self.provider, row.event_id, exc,
                           self._retry_delay)
            return False
        await asyncio.to_thread(self.outbox.mark_failed, row.seq, error)
        await self._settle(row)
        logger.error("{}: '{}' rejected event {} ({}); parked in the outbox as failed",
                     LOG, self.provider, row.event_id, exc)
        return True

    async def flush(self, timeout_s: float = 30.0) -> int:
        """Drain now and wait until nothing is pending (or time runs out); returns pending."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.status != "active":
                return 0
            await self._drain()
            pending = (await asyncio.to_thread(self.outbox.stats, self.provider)).pending
            if pending == 0 or self.read_only or time.monotonic() >= deadline:
                return pending
            await asyncio.sleep(0.05)

    # -- commands --------------------------------------------------------------------------
    async def set_read_only(self, on: bool) -> str:
        if self.status not in ("active", "passthrough"):
            return f"memory is {self.status}: {self.reason}"
        if self.status == "passthrough":
            return ("rolling_summary is nanobot's own memory; the plugin has no write gate "
                    "for it. Switch to a provider first.")
        self.read_only = on
        if self.adapter is not None:
            await self.adapter.set_mode(AdapterMode(
                read_only=on, reason="nanobot /memory-mode" if on else "nanobot read-write"))
        persisted = self._persist(with_plugin_option(self.settings.raw, "read_only", on))
        if not on:
            self._schedule_drain()
        state = "read-only: turns are not saved to memory" if on else \
            "read-write: turns are saved to memory"
        return f"memory is now {state} ({persisted})"

    def _persist(self, raw: dict[str, Any]) -> str:
        try:
            write_settings(self.settings.path, raw)
        except OSError as exc:
            return f"not saved: {exc}"
        self.settings.raw = raw
        return f"saved to {self.settings.path}"

    async def switch_provider(self, name: str) -> str:
        from nanobot_memory_adapters.registry import available_providers, resolve_config

        specs = available_providers()
        if name not in specs:
            return f"unknown provider '{name}': {_suggest(name, list(specs))}"
        if self.settings.exists and self.settings.memory is None and not self.settings.raw:
            return f"{self.settings.path} cannot be read ({self.reason}); fix it first"
        spec = specs[name]
        raw = with_provider(self.settings.raw, name, spec.kind)
        try:
            memory_block, _plugin = split_file(raw)
            resolve_config(memory_block)
        except ConfigError as exc:
            return f"cannot switch to '{name}': {exc}"
        candidate = LoadedSettings(self.settings.path, True, None, self.settings.plugin, raw)
        candidate = _reloaded(candidate)
        if candidate.error:
            return f"cannot switch to '{name}': {candidate.error}"
        if name != PASSTHROUGH:
            problem = self._check_block(candidate)
            if problem:
                return f"cannot switch to '{name}': {problem}"
        drain_lock = self._lock()
        async with drain_lock:
            new_adapter: MemoryAdapter | None = None
            if name != PASSTHROUGH:
                old_data_dir = self.data_dir
                self.data_dir = data_dir_for(candidate)
                try:
                    if self.adapter is not None and name == self.provider:
                        pass  # same provider: keep the open one
                    else:
                        await self._close_adapter()  # embedded stores allow one client
                        new_adapter = await asyncio.to_thread(self._build, candidate.memory)
                except Exception as exc:
                    self.data_dir = old_data_dir
                    self.adapter = None
                    self._note_error("switch", exc, retryable=False)
                    return (f"cannot switch to '{name}': {exc}. Still using "
                            f"'{self.provider or 'nanobot memory'}' (it reconnects on next use)")
            else:
                await self._close_adapter()
            persisted = self._persist(raw)
            self.settings = _reloaded(LoadedSettings(self.settings.path, True, None,
                                                     self.settings.plugin, raw))
            self.cache.clear()
            self._scopes_ready = set()
            self._build_task = None
            self.writes_failing_since = self.reads_failing_since = None
            self._apply_settings()
            if self._outbox is not None and self._outbox.path.parent != self.data_dir:
                self._outbox.close()  # the new provider keeps its outbox in its data dir
                self._outbox = None
            if new_adapter is not None:
                if self.read_only:
                    await new_adapter.set_mode(AdapterMode(read_only=True,
                                                           reason="nanobot read-only"))
                self.adapter = new_adapter
        self._schedule_drain()
        return f"memory provider is now '{name}' ({spec.kind}; {persisted})"

    # -- reports ---------------------------------------------------------------------------
    def scope_line(self, ctx: Any) -> str:
        memory = self.settings.memory
        if memory is None:
            return "scope: -"
        msg = ctx.msg
        values = identity_values(channel=msg.channel, chat_id=msg.chat_id,
                                 sender_id=msg.sender_id, session_key=ctx.key)
        try:
            scope, session_id = scope_for(memory, values)
        except ValueError as exc:
            return f"scope: cannot be built ({exc})"
        return (f"scope (this chat): run={scope.run_id} user={scope.persona_id} "
                f"agent={scope.agent_id} session={session_id}")

    def mode_report(self, ctx: Any) -> str:
        lines = []
        if self.status == "active":
            kind = "backend" if self.settings.memory and self.settings.memory.backend \
                else "condition"
            lines.append(f"memory provider: {self.provider} ({kind})")
            adapter = self.adapter
            if adapter is not None and adapter.backend_name != self.provider:
                lines.append(f"runs as: {adapter.backend_name} — {adapter.info.description}")
            lines.append("mode: " + ("read-only (turns are not saved)" if self.read_only
                                     else "read-write (turns are saved after each reply)"))
            lines.append(self.scope_line(ctx))
            lines.append(f"data dir: {self.data_dir}")
        elif self.status == "passthrough":
            lines.append("memory provider: rolling_summary (control)")
            lines.append("mode: nanobot's own MEMORY.md / history.jsonl / Dream, untouched")
        else:
            lines.append(f"memory: {self.status} — {self.reason}")
        lines.append(f"config: {self.settings.path}")
        lines.append("switch: /memory-mode <provider> | /memory-mode read-only on|off")
        return "\n".join(lines)

    async def health_report(self, ctx: Any) -> str:
        lines: list[str] = []
        if self.status == "passthrough":
            return "\n".join([
                "memory: rolling_summary (control) — nanobot's own memory is in charge",
                *self._native_memory_lines(),
                f"config: {self.settings.path}",
            ])
        if self.status != "active":
            return "\n".join([f"memory: {self.status} — {self.reason}",
                              f"config: {self.settings.path}",
                              "nanobot is running with its own memory (MEMORY.md)."])
        health = None
        if await self._ensure_adapter():
            assert self.adapter is not None
            try:
                health = await asyncio.wait_for(self.adapter.health(),
                                                self.settings.plugin.health_timeout_s)
            except Exception as exc:
                self._note_error("health", exc, retryable=True)
        stats = await asyncio.to_thread(self.outbox.stats, self.provider)
        status = health.status if health is not None else "unavailable"
        if status == "ok" and (self.writes_failing_since or self.reads_failing_since):
            status = "degraded"
        if self.writes_failing_since and stats.pending:
            status = "unavailable" if status != "ok" else "degraded"
        info = getattr(self.adapter, "info", None)
        lines.append(f"memory: {self.provider} — {status}")
        if self.writes_failing_since:
            lines.append(f"writes failing since {_ago(self.writes_failing_since)}; "
                         "turns are kept in the outbox")
        if self.reads_failing_since:
            lines.append(f"reads failing since {_ago(self.reads_failing_since)}; "
                         "answering with stale or no memory")
        if health is not None:
            lines.append(f"backend health: {health.status}"
                         + (f" ({health.latency_ms:.0f} ms)" if health.latency_ms else ""))
            lines.append(f"kind: {health.condition_kind}; consistency: "
                         f"{health.consistency_model}")
            lines.append("capabilities: " + (", ".join(health.capabilities) or "none"))
            if health.native_memory_types:
                lines.append("native memory types: " + ", ".join(health.native_memory_types))
            if health.native_ingest_modes:
                lines.append("ingest modes: " + ", ".join(health.native_ingest_modes))
            for warning in health.warnings[:3]:
                lines.append(f"warning: {warning}")
        elif info is not None:
            lines.append(f"kind: {info.condition_kind}; consistency: {info.consistency_model}; "
                         "capabilities: " + (", ".join(capabilities_of(self.adapter)) or "none"))
        else:
            lines.append("backend health: unavailable (provider could not be started)")
        lines.append("mode: " + ("read-only" if self.read_only else "read-write"))
        outbox = f"outbox: {stats.pending} pending"
        if stats.pending:
            outbox += f" (oldest {_ago(stats.oldest_pending_at)})"
        outbox += f", {stats.failed} failed, {stats.delivered} delivered"
        if stats.pending_other_providers:
            outbox += f"; {stats.pending_other_providers} pending for other providers"
        lines.append(outbox)
        if self.last_error is not None:
            e = self.last_error
            lines.append(f"last error: {e.operation} {_ago(e.at)}: {e.message[:300]}")
        else:
            lines.append("last error: none")
        lines.append(f"retrieve latency: {self.retrieve_stats.line()}")
        lines.append(f"record latency: {self.record_stats.line()}")
        lines.append(f"config: {self.settings.path}")
        return "\n".join(lines)

    def _native_memory_lines(self) -> list[str]:
        return seams.native_memory_summary(self.loop)

    def status_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "provider": self.provider,
            "read_only": self.read_only, "config": str(self.settings.path),
            "data_dir": str(self.data_dir) if self.data_dir else None,
            "at": datetime.now(UTC).isoformat(),
        }


def _reloaded(candidate: LoadedSettings) -> LoadedSettings:
    """Validate a not-yet-written settings JSON exactly as load_settings would."""
    return parse_settings(candidate.path, candidate.raw)
