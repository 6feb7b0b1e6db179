"""The plugin at run time: one provider, per-session recall cache, outbox-backed writes.

This module holds the plugin's lifecycle (settings, building and closing the provider)
and its commands; the read path is ``recall.py``, the write path ``delivery.py``, the
replies of ``/memory-mode`` and ``/memory-health`` ``reports.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nanobot_memory_adapters.config import (
    ConfigError,
    MemoryConfig,
    _suggest,
    validation_to_config_error,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    AdapterMode,
    MemoryAdapter,
    MemoryScope,
)
from nanobot_memory_adapters.diagnostics import mentions_lock_contention
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams, skill
from nanobot_memory_adapters.nanobot.backfill_mixin import BackfillMixin
from nanobot_memory_adapters.nanobot.delivery import DeliveryMixin
from nanobot_memory_adapters.nanobot.forget import ForgetMixin
from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, Outbox, describe_failure
from nanobot_memory_adapters.nanobot.people import People
from nanobot_memory_adapters.nanobot.recall import RecallMixin
from nanobot_memory_adapters.nanobot.reports import ReportsMixin
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME, MemorySearchTool
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
from nanobot_memory_adapters.nanobot.state import (
    LOG,
    OUTBOX_FILE,
    Activity,
    CacheEntry,
    KnownHealth,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.store_lock import StoreLockNotice
from nanobot_memory_adapters.nanobot.turn_line import RecallNote
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns
from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm

_plugins: weakref.WeakKeyDictionary[Any, MemoryPlugin] = weakref.WeakKeyDictionary()


def plugin_for(loop: Any) -> MemoryPlugin | None:
    """The plugin attached to an AgentLoop (tests, the SDK, diagnostics)."""
    return _plugins.get(loop)


class MemoryPlugin(RecallMixin, DeliveryMixin, ReportsMixin, ForgetMixin, BackfillMixin):
    """Everything the plugin does inside one AgentLoop: lifecycle and commands here; the
    read path in ``recall.py``, the write path in ``delivery.py``, the replies in
    ``reports.py``."""

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
        self.people = People()
        self.retrieve_stats = LatencyStats()
        self.record_stats = LatencyStats()
        self.enqueue_stats = LatencyStats()
        self.last_error: LastError | None = None
        self.writes_failing_since: float | None = None
        self.reads_failing_since: float | None = None
        self.store_lock = StoreLockNotice()  # "another process holds the store", said once
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
        # Turns the outbox could not take yet (kept in order, retried), and the exit bound.
        self.unqueued = UnqueuedTurns()
        self._write_lock: asyncio.Lock | None = None
        self._recovered = False  # open rows of dead processes promoted (once per process)
        self._exit_deadline: float | None = None
        self._exit_timeouts: set[asyncio.Timeout] = set()
        self._left_said = False
        self.activity: Activity | None = None  # what the backend is busy with, if anything
        self.known_health: KnownHealth | None = None
        self._health_task: asyncio.Task[Any] | None = None
        self.last_recall: RecallNote | None = None  # /memory-health's "last recall"
        self.recall_notes: dict[str, RecallNote] = {}  # per session, for the per-turn line
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
        elif self._owns_adapter and _host_native(s.memory.provider_name):
            # In a user's nanobot a host-native provider (rolling_summary) *is* nanobot's own
            # memory: hands off. A provided instance (the benchmark's) is served through the
            # slot like any other.
            self.status, self.provider = "passthrough", s.memory.provider_name
            self.reason = (f"{self.provider}: nanobot's own MEMORY.md, history.jsonl and "
                           "Dream are in charge; the plugin is passive")
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

    def _memory_for_build(self, memory: MemoryConfig) -> MemoryConfig:
        """The memory config with ``"llm": "nanobot"`` resolved from nanobot's config (in
        memory only; memory.json keeps ``"nanobot"``)."""
        return resolve_nanobot_llm(memory, seams.nanobot_config_path(self.sessions))

    def _check_block(self, s: LoadedSettings) -> str | None:
        """Validate the provider's own block now, so a mistake is reported at startup."""
        from nanobot_memory_adapters.registry import provider_class, resolve_config

        assert s.memory is not None
        try:
            memory = self._memory_for_build(s.memory)
            _config, spec = resolve_config(memory)
            cls = provider_class(spec)
            cls.config_model.model_validate(memory.provider_block())
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
        # the read-only search tool is offered only while a provider is in charge
        if self.status == "active" and self.settings.plugin.search_tool:
            seams.register_tool(self.loop, MemorySearchTool(self))
        else:
            seams.hide_tool(self.loop, SEARCH_TOOL_NAME)

    def attach(self) -> None:
        """Hook into the loop: prompt memory view, per-turn recall, turn writes, commands."""
        from nanobot.bus.runtime_events import SessionTurnPersisted

        seams.install_memory_view(self.loop, self.text_for_prompt)
        # the user's message is queued on arrival, before recall and the model
        self._unsubscribe.append(self.loop.register_runtime_context_provider(self.open_turn))
        self._unsubscribe.append(self.loop.register_runtime_context_provider(self.provide))
        self._unsubscribe.append(self.bus.subscribe(self.on_turn_persisted, SessionTurnPersisted))
        self._unsubscribe.append(self.bus.subscribe(self.on_shared_turn_persisted,
                                                    SessionTurnPersisted))
        seams.on_loop_close(self.loop, self.loop_closing)
        seams.amend_replies(self.loop, self.turn_line_for)
        seams.before_session_archive(self.loop, self.before_archive)
        seams.on_loop_start(self.loop, self._start)

    def _start(self) -> None:
        """Deliver what earlier processes left (pending rows, turns cut short) at once."""
        if self.status == "active" and not self.read_only:
            seams.schedule_background(self.loop, self._drain())

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

    def _writes_lock(self) -> asyncio.Lock:
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        return self._write_lock

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
        self.activity = Activity(f"starting provider '{provider}'", time.time())
        try:
            adapter = await asyncio.to_thread(self._build, memory)
        except (ConfigError, ImportError, ValidationError) as exc:
            self._disable(str(exc))
            self._sync_skill()
            return False
        except Exception as exc:  # the backend itself is down: keep events, retry later
            self._build_failed_at = time.time()
            self._note_error("build_provider", exc, retryable=True)
            if not self.store_lock.report(provider, self.data_dir, exc, None):
                logger.warning("{}: provider '{}' not available yet: {}", LOG, provider, exc)
            return False
        finally:
            self.activity = None
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

        return load_provider(self._memory_for_build(memory), data_dir=self.data_dir)

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
        if self._health_task is not None and not self._health_task.done():
            # a check /memory-health left running: its thread is not abandoned at exit
            await asyncio.wait({self._health_task},
                               timeout=self.settings.plugin.health_timeout_s)
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
        self.last_error = LastError(time.time(), operation, message[:1000], retryable,
                                    store_locked=mentions_lock_contention(exc))

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

    async def requeue_failed(self) -> str:
        """Put this provider's failed outbox rows back to pending and deliver them now."""
        if self.status != "active":
            return f"memory is {self.status}: {self.reason}"
        try:
            count = await asyncio.to_thread(self.outbox.requeue_failed, self.provider,
                                            wait_s=5.0)
        except OUTBOX_ERRORS as exc:
            return f"nothing requeued: {describe_failure(self.outbox.path, exc)}"
        if count:
            self._schedule_drain()
        return (f"requeued {count} failed turn(s) for '{self.provider}'; delivering them now"
                if count else f"no failed turns for '{self.provider}'")

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
        host_native = _host_native(name)
        if not host_native:
            problem = self._check_block(candidate)
            if problem:
                return f"cannot switch to '{name}': {problem}"
        drain_lock = self._lock()
        async with drain_lock:
            new_adapter: MemoryAdapter | None = None
            if not host_native:
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

def _host_native(name: str) -> bool:
    """Whether the provider is nanobot's own memory (``ProviderInfo.host_native``)."""
    from nanobot_memory_adapters.provider import is_host_native
    from nanobot_memory_adapters.registry import available_providers, provider_class

    spec = available_providers().get(name)
    if spec is None:
        return False
    try:
        return is_host_native(provider_class(spec))
    except (ImportError, ConfigError):
        return False


def _reloaded(candidate: LoadedSettings) -> LoadedSettings:
    """Validate a not-yet-written settings JSON exactly as load_settings would."""
    return parse_settings(candidate.path, candidate.raw)
