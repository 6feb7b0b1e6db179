"""The plugin at run time: one provider, per-session recall cache, outbox-backed writes.

This module holds the plugin's lifecycle (settings, building and closing the provider)
and its commands; the read path is ``recall.py``, the write path ``delivery.py``, the
replies of ``/memory-mode`` and ``/memory-health`` ``reports.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nanobot_memory_adapters import tokens
from nanobot_memory_adapters.config import (
    ConfigError,
    MemoryConfig,
    _suggest,
    validation_to_config_error,
)
from nanobot_memory_adapters.contract import (
    AdapterMode,
    MemoryAdapter,
    MemoryScope,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams, skill
from nanobot_memory_adapters.nanobot.audience import Audience
from nanobot_memory_adapters.nanobot.backfill_chat import Backfill, BackfillProgress
from nanobot_memory_adapters.nanobot.delivery import Delivery
from nanobot_memory_adapters.nanobot.forget import Forget
from nanobot_memory_adapters.nanobot.guide_tool import MemoryGuideTool
from nanobot_memory_adapters.nanobot.outbox import OUTBOX_ERRORS, Outbox, describe_failure
from nanobot_memory_adapters.nanobot.people import operators_terminal
from nanobot_memory_adapters.nanobot.plugin_state import PluginState
from nanobot_memory_adapters.nanobot.prepared import PreparedRecalls
from nanobot_memory_adapters.nanobot.recall import Recall
from nanobot_memory_adapters.nanobot.reports import Reports
from nanobot_memory_adapters.nanobot.search_tool import SEARCH_TOOL_NAME, MemorySearchTool
from nanobot_memory_adapters.nanobot.settings import (
    LoadedSettings,
    data_dir_for,
    load_settings,
    parse_settings,
    read_json,
    settings_path,
    split_file,
    with_plugin_option,
    with_provider,
    write_settings,
)
from nanobot_memory_adapters.nanobot.state import (
    LOG,
    Activity,
    CacheEntry,
    LastError,
    LatencyStats,
)
from nanobot_memory_adapters.nanobot.switching import SwitchFailed
from nanobot_memory_adapters.nanobot.unqueued import UnqueuedTurns
from nanobot_memory_adapters.nanobot_llm import resolve_nanobot_llm

_plugins: weakref.WeakKeyDictionary[Any, MemoryPlugin] = weakref.WeakKeyDictionary()


def plugin_for(loop: Any) -> MemoryPlugin | None:
    """The plugin attached to an AgentLoop (tests, the SDK, diagnostics)."""
    return _plugins.get(loop)


class MemoryPlugin:
    """Everything the plugin does inside one AgentLoop: lifecycle (settings, building and
    closing the provider) and commands here; it owns the shared ``PluginState`` and its
    collaborators: ``Recall`` (read path), ``Delivery`` (write path), ``Reports``
    (``/memory-mode``, ``/memory-health``), ``Forget`` and ``Backfill``."""

    def __init__(self, loop: Any, *, sessions: Any, workspace: Path,
                 provided: Any = None) -> None:
        self.loop = loop
        self.workspace = Path(workspace)
        config_dir = seams.config_dir_of(sessions) or seams.default_config_dir()
        path = settings_path(config_dir)
        # A provider handed in by the embedding program (nanobot.tool.provided_memory):
        # described by its own settings, used as it is, never closed here.
        self._owns_adapter = provided is None
        if provided is not None:
            path = self.workspace / "memory.json"
            settings = parse_settings(path, provided.settings)
        else:
            settings = load_settings(path)
        self.settings_path = path
        self.state = PluginState(loop, sessions, settings)
        self._build_failed_at: float | None = None
        self._scopes_ready: set[str] = set()
        self._build_task: asyncio.Task[bool] | None = None
        self._unsubscribe: list[Any] = []
        self._delivery = Delivery(self.state, ensure_adapter=self._ensure_adapter,
                                  ensure_scope=self._ensure_scope)
        self._recall = Recall(self.state, ensure_adapter=self._ensure_adapter,
                              ensure_scope=self._ensure_scope, delivery=self._delivery)
        self._delivery.on_settled = self._recall.prepared.soon
        self._backfill = Backfill(self.state, switch=self.switch_provider,
                                  delivery=self._delivery)
        self._reports = Reports(self.state, ensure_adapter=self._ensure_adapter,
                                recall=self._recall, backfill=self._backfill)
        self._forget = Forget(self.state, ensure_adapter=self._ensure_adapter)
        # what commands, the search tool, the SDK and tests call, done by a collaborator
        self.recall, self.search = self._recall.recall, self._recall.search
        self.flush, self._write_out = self._delivery.flush, self._delivery.write_out
        self.mode_report, self.health_report = self._reports.mode_report, \
            self._reports.health_report
        self.status_dict = self._reports.status_dict
        self.forget_preview, self.forget = self._forget.forget_preview, self._forget.forget
        self.switch_with_backfill = self._backfill.switch_with_backfill
        self.backfill_line = self._backfill.line
        self._apply_settings()
        if provided is not None and self.state.status == "active":
            self.state.adapter = provided.adapter
        _plugins[loop] = self

    # -- the state commands, the tools, the SDK and tests read --------------------------
    @property
    def status(self) -> str:
        return self.state.status

    @property
    def reason(self) -> str:
        return self.state.reason

    @property
    def provider(self) -> str:
        return self.state.provider

    @property
    def read_only(self) -> bool:
        return self.state.read_only

    @property
    def adapter(self) -> MemoryAdapter | None:
        return self.state.adapter

    @property
    def settings(self) -> LoadedSettings:
        return self.state.settings

    @property
    def outbox(self) -> Outbox:
        return self.state.queues.outbox

    @property
    def cache(self) -> OrderedDict[str, CacheEntry]:
        return self.state.cache

    @property
    def prepared(self) -> PreparedRecalls:
        """Recall prepared after a turn's writes land (query-independent providers)."""
        return self._recall.prepared

    @property
    def unqueued(self) -> UnqueuedTurns:
        return self.state.queues.unqueued

    @property
    def last_error(self) -> LastError | None:
        return self.state.health.last_error

    @property
    def writes_failing_since(self) -> float | None:
        return self.state.health.writes_failing_since

    @property
    def retrieve_stats(self) -> LatencyStats:
        return self.state.health.retrieve_stats

    @property
    def record_stats(self) -> LatencyStats:
        return self.state.health.record_stats

    @property
    def enqueue_stats(self) -> LatencyStats:
        return self.state.health.enqueue_stats

    @property
    def backfill_progress(self) -> BackfillProgress | None:
        return self._backfill.progress

    # -- lifecycle ---------------------------------------------------------------------
    def _apply_settings(self) -> None:
        """Decide the status from memory.json (sync, cheap, never raises)."""
        s = self.state.settings
        self.state.read_only = s.plugin.read_only
        self.state.retry_delay = s.plugin.retry_initial_s
        if not s.exists:
            self.state.status, self.state.provider = "unconfigured", ""
            self.state.reason = (f"no {s.path.name} at {s.path}; nanobot's own memory (MEMORY.md) "
                                 "is in use")
            logger.debug("{}: {}", LOG, self.state.reason)
        elif s.error or s.memory is None:
            self._disable(s.error or "memory config could not be read")
        elif not s.memory.enabled:
            self.state.status, self.state.provider = "disabled", s.memory.provider_name
            self.state.reason = f'"enabled": false in {s.path}; nanobot\'s own memory is in use'
            logger.info("{}: memory disabled — {}", LOG, self.state.reason)
        elif self._owns_adapter and _host_native(s.memory.provider_name):
            # In a user's nanobot a host-native provider (rolling_summary) *is* nanobot's own
            # memory: hands off. A provided instance (the benchmark's) is served through the
            # slot like any other.
            self.state.status, self.state.provider = "passthrough", s.memory.provider_name
            self.state.reason = (f"{self.state.provider}: nanobot's own MEMORY.md, "
                                 "history.jsonl and Dream are in charge; the plugin is passive")
            logger.debug("{}: {}", LOG, self.state.reason)
        else:
            problem = self._check_block(s)
            if problem:
                self._disable(problem)
            else:
                self.state.status, self.state.provider = "active", s.memory.provider_name
                self.state.reason = ""
                self.state.data_dir = data_dir_for(s)
                logger.debug("{}: memory provider '{}' selected (config {}, data {})",
                            LOG, self.state.provider, s.path, self.state.data_dir)
        self._sync_skill()

    def _disable(self, why: str) -> None:
        self.state.status, self.state.reason = "disabled", why
        logger.error("{}: memory disabled — {} (fix {}); nanobot keeps running with its own "
                     "memory", LOG, why, self.state.settings.path)

    def _memory_for_build(self, memory: MemoryConfig) -> MemoryConfig:
        """The memory config with ``"llm": "nanobot"`` resolved from nanobot's config (in
        memory only; memory.json keeps ``"nanobot"``)."""
        return resolve_nanobot_llm(memory, seams.nanobot_config_path(self.state.sessions))

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
        if self.state.status == "active" and self.state.settings.plugin.install_skill:
            skill.install_skill(self.workspace)
            # named in the guidance only if it is the guide and nanobot lists it (a user's
            # own file of that name, or the skill in nanobot's disabledSkills, is not)
            self.state.skill_listed = skill.skill_is_ours(self.workspace) and seams.lists_skill(
                self.loop, skill.SKILL_NAME) is not False
        else:
            skill.remove_skill(self.workspace)
            self.state.skill_listed = False
        # the read-only search tool is offered only while a provider is in charge
        if self.state.status == "active" and self.state.settings.plugin.search_tool:
            seams.register_tool(self.loop, MemorySearchTool(self))
        else:
            seams.hide_tool(self.loop, SEARCH_TOOL_NAME)
        if self.state.status == "active" and self.state.settings.plugin.guide_tool:
            seams.register_tool(self.loop, MemoryGuideTool())
        else:
            seams.hide_tool(self.loop, skill.GUIDE_TOOL_NAME)

    def attach(self) -> None:
        """Hook into the loop: prompt memory view, per-turn recall, turn writes, commands.
        Per-turn context and persisted turns go through nanobot's public SDK facade
        (``RuntimeClient``), whose signatures held through nanobot's memory refactor."""
        from nanobot.sdk.clients import RuntimeClient

        tokens.offer_cl100k_offline()  # nanobot counts every prompt with cl100k_base
        seams.install_memory_view(self.loop, self._recall.text_for_prompt)
        # the user's message is queued on arrival, before recall and the model
        recall, delivery = self._recall, self._delivery
        runtime = RuntimeClient(self.loop)
        self._unsubscribe.append(runtime.add_context_provider(delivery.open_turn))
        self._unsubscribe.append(runtime.add_context_provider(recall.provide))
        self._unsubscribe.append(runtime.on_session_turn_persisted(delivery.on_turn_persisted))
        self._unsubscribe.append(runtime.on_session_turn_persisted(
            recall.on_shared_turn_persisted))
        seams.on_loop_close(self.loop, delivery.loop_closing)
        seams.amend_replies(self.loop, recall.turn_line_for)
        seams.before_session_archive(self.loop, delivery.before_archive)
        seams.summaries_without_system_prompt(self.loop, recall.prompt_memory_unsaved)
        seams.on_loop_start(self.loop, self._start)

    def _start(self) -> None:
        """Deliver what earlier processes left (pending rows, turns cut short) at once."""
        if self.state.status == "active" and not self.state.read_only:
            seams.schedule_background(self.loop, self._delivery.drain())

    async def _ensure_adapter(self) -> bool:
        """The provider is built once, in a task a timed-out caller cannot cancel."""
        if self.state.status != "active" or self.state.closed:
            return False
        if self.state.adapter is not None:
            return True
        task = self._build_task
        if task is None or task.done():
            if (self._build_failed_at is not None
                    and time.time() - self._build_failed_at < self.state.retry_delay):
                return False
            task = self._build_task = asyncio.get_running_loop().create_task(
                self._build_adapter())
        return await asyncio.shield(task)

    async def _build_adapter(self) -> bool:
        memory = self.state.settings.memory
        assert memory is not None
        provider = self.state.provider
        self.state.health.activity = Activity(f"starting provider '{provider}'", time.time())
        try:
            adapter = await asyncio.to_thread(self._build, memory)
        except (ConfigError, ImportError, ValidationError) as exc:
            self._disable(str(exc))
            self._sync_skill()
            return False
        except Exception as exc:  # the backend itself is down: keep events, retry later
            self._build_failed_at = time.time()
            self.state.health.note_error("build_provider", exc, retryable=True)
            if not self.state.health.store_lock.report(provider, self.state.data_dir, exc, None):
                logger.warning("{}: provider '{}' not available yet: {}", LOG, provider, exc)
            return False
        finally:
            self.state.health.activity = None
        if (self.state.closed or self.state.status != "active" or self.state.provider != provider
                or self.state.adapter is not None):
            await adapter.aclose()  # closed or switched meanwhile
            return self.state.adapter is not None
        self._build_failed_at = None
        if self.state.read_only:
            await adapter.set_mode(AdapterMode(read_only=True, reason="nanobot read-only"))
        self.state.adapter = adapter
        self._scopes_ready = set()
        logger.debug("{}: memory provider '{}' ready", LOG, provider)
        # Events left by an earlier process (or an outage) go out now, and what other
        # processes queue from here on as it comes.
        self._delivery.schedule_drain()
        self._delivery.watch_others()
        return True

    def _build(self, memory: Any) -> MemoryAdapter:
        from nanobot_memory_adapters.registry import load_provider

        return load_provider(self._memory_for_build(memory), data_dir=self.state.data_dir)

    async def _ensure_scope(self, scope: MemoryScope) -> None:
        assert self.state.adapter is not None
        if scope.key in self._scopes_ready:
            return
        await self.state.adapter.setup_scope(scope)
        self._scopes_ready.add(scope.key)

    async def aclose(self) -> None:
        """Release the provider (embedded stores hold file locks) and the outbox."""
        self.state.closed = True
        for unsubscribe in self._unsubscribe:
            with contextlib.suppress(Exception):
                unsubscribe()
        self._unsubscribe.clear()
        health_task = self._reports.health_task
        if health_task is not None and not health_task.done():
            # a check /memory-health left running: its thread is not abandoned at exit
            await asyncio.wait({health_task}, timeout=self.state.settings.plugin.health_timeout_s)
        for task in (self._delivery.retry_task, self._delivery.watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._delivery.retry_task = self._delivery.watch_task = None
        if self.state.queues.drain_lock is not None:
            async with self.state.queues.drain_lock:
                await self._close_adapter()
        else:
            await self._close_adapter()
        self.state.queues.close_outbox()
        self.state.audiences.close()

    async def _close_adapter(self) -> None:
        await self._recall.prepared.aclose()  # nothing prepares from a closing provider
        adapter, self.state.adapter = self.state.adapter, None
        if adapter is not None and self._owns_adapter:
            try:
                await adapter.aclose()
            except Exception as exc:
                logger.warning("{}: closing '{}' failed: {}", LOG, adapter.backend_name, exc)

    # -- commands --------------------------------------------------------------------------
    async def command_audience(self, ctx: Any) -> Audience:
        """Whose memory a command's reply may show: the chat it is sent to (its reply is
        saved in that session), as for a turn; the error text also on nanobot's own
        terminal (``people.operators_terminal``)."""
        msg = ctx.msg
        operator = operators_terminal(msg.channel, str(ctx.key), msg.sender_id)
        if self.state.status != "active" or self.state.settings.memory is None:
            return Audience(frozenset(), False, operator=operator)
        try:
            who = await self.state.audiences.attribute(session_key=ctx.key, channel=msg.channel,
                                                       chat_id=msg.chat_id, sender_id=msg.sender_id,
                                                       metadata=msg.metadata)
        except Exception:
            return Audience(frozenset(), False, operator=operator)
        audience = self.state.audiences.audience_of(who, channel=msg.channel, chat_id=msg.chat_id,
                                                    session_key=ctx.key, attributes=None)
        # a command's reply is saved in the chat's history (nanobot keeps it there)
        return dataclasses.replace(audience.in_history(), operator=operator)

    async def set_read_only(self, on: bool) -> str:
        if self.state.status not in ("active", "passthrough"):
            return f"memory is {self.state.status}: {self.state.reason}"
        if self.state.status == "passthrough":
            return ("rolling_summary is nanobot's own memory; the plugin has no write gate "
                    "for it. Switch to a provider first.")
        self.state.read_only = on
        if self.state.adapter is not None:
            await self.state.adapter.set_mode(AdapterMode(
                read_only=on, reason="nanobot /memory-mode" if on else "nanobot read-write"))
        raw, problem = self._on_disk()
        persisted = (f"not saved: {problem}" if raw is None
                     else self._persist(with_plugin_option(raw, "read_only", on)))
        if not on:
            self._delivery.schedule_drain()
        state = "read-only: turns are not saved to memory" if on else \
            "read-write: turns are saved to memory"
        return f"memory is now {state} ({persisted})"

    async def requeue_failed(self) -> str:
        """Put this provider's failed outbox rows back to pending and deliver them now."""
        if self.state.status != "active":
            return f"memory is {self.state.status}: {self.state.reason}"
        try:
            count = await asyncio.to_thread(self.outbox.requeue_failed, self.state.provider,
                                            wait_s=5.0)
        except OUTBOX_ERRORS as exc:
            return f"nothing requeued: {describe_failure(self.outbox.path, exc)}"
        if count:
            self._delivery.schedule_drain()
        return (f"requeued {count} failed turn(s) for '{self.state.provider}'; delivering them now"
                if count else f"no failed turns for '{self.state.provider}'")

    def _on_disk(self) -> tuple[dict[str, Any] | None, str | None]:
        """memory.json as it is now, to change one setting in (the user may have edited
        it since nanobot started; the copy read then would undo that): its object, or why
        it cannot be changed without losing what the user wrote."""
        path = self.state.settings.path
        if not self._owns_adapter or not path.exists():  # provided settings live in memory
            return dict(self.state.settings.raw), None
        try:
            raw = read_json(path)
        except ConfigError as exc:
            return None, f"{exc}; it was left as it is"
        if not isinstance(raw, dict):
            return None, f"{path} holds no JSON object; it was left as it is"
        return raw, None

    def _persist(self, raw: dict[str, Any]) -> str:
        try:
            write_settings(self.state.settings.path, raw)
        except OSError as exc:
            return f"not saved: {exc}"
        self.state.settings.raw = raw
        return f"saved to {self.state.settings.path}"

    @staticmethod
    def is_host_native(name: str) -> bool:
        """Whether ``name`` (any case) is a provider that hands memory to nanobot itself."""
        from nanobot_memory_adapters.registry import available_providers

        specs = available_providers()
        return _host_native(name if name in specs else name.lower())

    async def switch_provider(self, name: str) -> str:
        from nanobot_memory_adapters.registry import available_providers, resolve_config

        specs = available_providers()
        if name not in specs and name.lower() in specs:  # FULL_HISTORY is full_history
            name = name.lower()
        if name not in specs:
            shown = name if len(name) <= 60 else name[:57] + "..."
            return f"unknown provider '{shown}': {_suggest(name[:60], list(specs))}"
        settings = self.state.settings
        if settings.exists and settings.memory is None and not settings.raw:
            return f"{settings.path} cannot be read ({self.state.reason}); fix it first"
        spec = specs[name]
        on_disk, problem = self._on_disk()
        if on_disk is None:
            return f"cannot switch to '{name}': {problem}"
        raw = with_provider(on_disk, name, spec.kind)
        try:
            memory_block, _plugin = split_file(raw)
            resolve_config(memory_block)
        except ConfigError as exc:
            return f"cannot switch to '{name}': {exc}"
        candidate = LoadedSettings(settings.path, True, None, settings.plugin, raw)
        candidate = _reloaded(candidate)
        if candidate.error:
            return f"cannot switch to '{name}': {candidate.error}"
        host_native = _host_native(name)
        if not host_native:
            problem = self._check_block(candidate)
            if problem:
                return f"cannot switch to '{name}': {problem}"
        if self.state.queues.draining().locked():
            # a turn is being saved (an extraction on a busy local model takes minutes): the
            # command answers now and the switch happens when that write is done
            busy = (self.state.health.activity.public_line() if self.state.health.activity
                    else "busy")
            seams.schedule_background(self.loop, self._switch_later(name, spec.kind, raw,
                                                                    candidate, host_native))
            return (f"switching to '{name}' as soon as the write in progress finishes "
                    f"({busy}); /memory-mode shows the provider in use")
        return await self._switch(name, spec.kind, raw, candidate, host_native)

    async def _switch_later(self, name: str, kind: str, raw: dict[str, Any],
                            candidate: LoadedSettings, host_native: bool) -> None:
        try:
            text = await self._switch(name, kind, raw, candidate, host_native)
        except SwitchFailed as failed:
            text = failed.operator_text()
        logger.info("{}: /memory-mode {}: {}", LOG, name, text)

    async def _switch(self, name: str, kind: str, raw: dict[str, Any],
                      candidate: LoadedSettings, host_native: bool) -> str:
        """The switch itself, under this process's delivery lock."""
        async with self.state.queues.draining():
            new_adapter: MemoryAdapter | None = None
            if not host_native:
                old_data_dir = self.state.data_dir
                self.state.data_dir = data_dir_for(candidate)
                try:
                    if self.state.adapter is not None and name == self.state.provider:
                        pass  # same provider: keep the open one
                    else:
                        await self._close_adapter()  # embedded stores allow one client
                        new_adapter = await asyncio.to_thread(self._build, candidate.memory)
                except Exception as exc:
                    self.state.data_dir = old_data_dir
                    self.state.adapter = None
                    self.state.health.note_error("switch", exc, retryable=False)
                    logger.warning("{}: /memory-mode {}: the provider could not be built: {}",
                                   LOG, name, exc)
                    raise SwitchFailed(name, exc, self.state.provider) from exc
            else:
                await self._close_adapter()
            # the file as it is now: a switch that waited for a write must not put back
            # what it read before an edit made meanwhile (nor overwrite a half-made one)
            on_disk, problem = self._on_disk()
            if on_disk is None:
                persisted = f"not saved: {problem}"
            else:
                raw = with_provider(on_disk, name, kind)
                persisted = self._persist(raw)
            self.state.settings = _reloaded(LoadedSettings(self.state.settings.path, True, None,
                                                           self.state.settings.plugin, raw))
            self.state.cache.clear()
            self._scopes_ready = set()
            self._build_task = None
            self.state.health.writes_failing_since = self.state.health.reads_failing_since = None
            self.state.health.last_error = None  # the previous provider's: health is this one's now
            self._apply_settings()
            # the new provider keeps its outbox in its data dir
            self.state.queues.close_outbox(unless_in=self.state.data_dir)
            if new_adapter is not None:
                if self.state.read_only:
                    await new_adapter.set_mode(AdapterMode(read_only=True,
                                                           reason="nanobot read-only"))
                self.state.adapter = new_adapter
        self._delivery.schedule_drain()
        return f"memory provider is now '{name}' ({kind}; {persisted})"

def _host_native(name: str) -> bool:
    """Whether the provider is nanobot's own memory (``provider.is_host_native``)."""
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
