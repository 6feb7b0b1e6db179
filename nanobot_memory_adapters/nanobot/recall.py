"""The plugin's read path: recall before each turn, served to the prompt from a cache.

nanobot awaits the plugin's runtime-context provider before it builds a turn's prompt;
the plugin retrieves with the user's text as the query (bounded by ``recall_timeout_s``)
and caches the formatted ``<memory-context>`` per session. The prompt build then reads
the cache (``system_prompt`` placement, through ``MemoryView``) or gets the section as a
runtime-context block (``user_message`` placement) — no I/O in synchronous prompt code.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.audience import Audience, Piece, release
from nanobot_memory_adapters.nanobot.plugin_state import EnsureAdapter, EnsureScope, PluginState
from nanobot_memory_adapters.nanobot.prepared import PreparedRecalls
from nanobot_memory_adapters.nanobot.skill import guidance
from nanobot_memory_adapters.nanobot.state import (
    CACHE_SESSIONS,
    LOG,
    CacheEntry,
)
from nanobot_memory_adapters.nanobot.turn_line import RecallNote, is_trivial
from nanobot_memory_adapters.nanobot.turns import (
    as_of_from,
    chat_scope,
    command_scope,
    tags_from,
)
from nanobot_memory_adapters.tokens import count_tokens_by_line

if TYPE_CHECKING:
    from nanobot_memory_adapters.nanobot.delivery import Delivery


class Recall:
    """The read path: per-turn recall into the cache, ``memory_search``, the per-turn line."""

    def __init__(self, state: PluginState, *, ensure_adapter: EnsureAdapter,
                 ensure_scope: EnsureScope, delivery: Delivery) -> None:
        self.state = state
        self._ensure_adapter = ensure_adapter
        self._ensure_scope = ensure_scope
        self._delivery = delivery  # read-your-writes: this session's turns land first
        # per session, for the per-turn line: the note as a piece of its scope, and the
        # audience of the reply it rides on (everyone who reads the chat)
        self.recall_notes: dict[str, tuple[str | None, Piece, Audience]] = {}
        self.scope_notes: dict[str, RecallNote] = {}  # per scope: its owner's /memory-health
        # the next turn's section, retrieved once this turn's writes land (full_history)
        self.prepared = PreparedRecalls(state)

    def text_for_prompt(self) -> str | None:
        """Sync, no I/O: the memory slot for the current turn, or None for MEMORY.md.

        The slot holds ``skill.guidance`` (what the memory section is, whether turns are
        saved: the same text every turn while the read-only switch stays, so the system
        prompt stays cacheable), then the cached context, through the audience gate: the
        audience noted for this very turn (``Recall.recall``) must admit the entry's scope
        (never a previous speaker's recall; nobody's when the turn was not seen). With
        ``context_placement: user_message`` the context travels in the user message
        (MEMORY.md is still not shown), except for a shared chat's personal recall, which
        goes here so it is never saved in the group's history."""
        if self.state.status != "active":
            return None
        if seams.archiving():
            # a session's archive (``/compact`` in a group, ``/new``, idle compaction):
            # its summary is saved in that session; MEMORY.md is built from every chat
            return ""
        request = seams.current_request()
        key = getattr(request, "session_key", None)
        if not key or key.startswith("dream:"):
            return None
        plugin = self.state.settings.plugin
        guide = ("skill" if self.state.skill_listed
                 else "tool" if plugin.guide_tool else None)
        told = Piece.plain(guidance(guide, saving=not self.state.read_only))
        entry = self.state.cache.get(key)
        if entry is None or not entry.text or (
                plugin.context_placement == "user_message" and not entry.in_system):
            return told.text
        audience = self.state.audiences.now(key, getattr(request, "turn_id", None))
        return release([told, Piece.memory(entry.text, entry.scope_key)], audience, "\n\n")

    def prompt_memory_unsaved(self) -> bool:
        """Whether the current turn's prompt carries memory its session may not keep (a
        shared chat's personal recall, ``group_recall: personal``): nanobot's in-turn
        compaction must not summarise that prompt into the session."""
        request = seams.current_request()
        key = getattr(request, "session_key", None)
        if not key:
            return False
        return self.state.audiences.carried_prompt_only(key, getattr(request, "turn_id", None))

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
                metadata=request.metadata,
                turn_id=request.turn_id,
            )
        except Exception as exc:  # a memory problem must never fail the turn
            self.state.health.note_error("retrieve", exc, retryable=False)
            logger.exception("{}: recall failed", LOG)
        if (self.state.settings.plugin.context_placement == "user_message" and entry is not None
                and entry.text and not entry.in_system):
            # the user message may be kept in the chat's history: not a prompt-only scope
            audience = self.state.audiences.now(request.session_key, request.turn_id)
            text = release([Piece.memory(entry.text, entry.scope_key)], audience.in_history())
            return seams.runtime_context_block(text) if text else None
        return None

    async def recall(
        self, *, session_key: str | None, query: str | None, channel: str, chat_id: str,
        sender_id: str | None, attributes: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None, turn_id: str | None = None,
    ) -> CacheEntry | None:
        if self.state.status != "active" or not session_key or session_key.startswith("dream:"):
            return None
        # nobody's memory until this turn's audience is known (a failure below leaves it so)
        self.state.audiences.note(session_key, turn_id, Audience.nobody())
        self.recall_notes.pop(session_key, None)  # an earlier turn's, never this one's
        if not seams.session_persists(self.state.sessions, session_key):
            return None  # nanobot shows no long-term memory to ephemeral sessions
        who = await self.state.audiences.attribute(
            session_key=session_key, channel=channel, chat_id=chat_id, sender_id=sender_id,
            metadata=metadata)
        audience = self.state.audiences.audience_of(who, channel=channel, chat_id=chat_id,
                                                    session_key=session_key, attributes=attributes)
        self.state.audiences.note(session_key, turn_id, audience)
        if not audience.scopes:
            self.state.cache.pop(session_key, None)  # nobody's memory, and no earlier speaker's
            return None
        try:
            request = self._request(query=query or "-", channel=channel, chat_id=chat_id,
                                    sender_id=who.person, session_key=session_key,
                                    attributes=attributes)
        except ValueError as exc:
            self.state.health.note_error("scope", exc, retryable=False)
            self.state.cache.pop(session_key, None)
            return None
        previous = self.state.cache.get(session_key)
        if previous is not None and (previous.scope_key != request.scope.key
                                     or previous.provider != self.state.provider):
            previous = None  # another person's (or provider's) recall is never reused
        if not query or not query.strip():  # a turn without text keeps its scope's last context
            entry = previous or CacheEntry("", request.scope.key, self.state.provider, time.time(),
                                           "", in_system=who.shared)
            self._remember(session_key, entry)
            return None  # served to the system prompt only (nothing new to append)
        if is_trivial(query, self.state.settings.plugin.trivial_prompts):  # no retrieve at all
            entry = previous or CacheEntry("", request.scope.key, self.state.provider, time.time(),
                                           "", in_system=who.shared)
            self._remember(session_key, entry)
            self._note_recall(session_key, RecallNote(self.state.provider, "skipped (trivial)"),
                              request.scope.key, audience, turn_id)
            return None
        scope = request.scope
        if channel == "cli":
            await self._say_pending(session_key)
        entry: CacheEntry
        if not await self._ready_for(scope):
            entry = self._stale(previous, scope, query)
            self._note_recall(session_key, RecallNote(self.state.provider, "unavailable",
                                                      detail="provider not ready"),
                              scope.key, audience, turn_id)
        else:
            assert self.state.adapter is not None
            await self._delivery.wait_for_own_writes(
                session_key, self.state.settings.plugin.read_your_writes_s)
            started = time.perf_counter()
            timeout_s = self.state.settings.plugin.recall_timeout_s  # for the whole recall
            self.prepared.remember(session_key, request)
            if (prepared := await self.prepared.take(session_key, request, timeout_s)
                    ) is not None:
                latency_ms = (time.perf_counter() - started) * 1000
                self.state.health.retrieve_stats.add(latency_ms)
                entry = CacheEntry(prepared.text, scope.key, self.state.provider, time.time(),
                                   query)
                self._note_recall(session_key, RecallNote(
                    self.state.provider, "recalled", items=prepared.items,
                    tokens=count_tokens_by_line(prepared.text) if prepared.text else 0,
                    latency_ms=latency_ms, detail="prepared"), scope.key, audience, turn_id)
                entry.in_system = who.shared
                self._remember(session_key, entry)
                return entry
            try:
                result = await asyncio.wait_for(
                    self.state.adapter.retrieve(request),
                    max(0.0, timeout_s - (time.perf_counter() - started)),
                )
            except (AdapterError, TimeoutError) as exc:
                self.state.health.note_read_failure("retrieve", exc, f"retrieve took longer than "
                                             f"{self.state.settings.plugin.recall_timeout_s}s")
                logger.warning("{}: retrieve from '{}' failed ({}); answering with {} memory",
                               LOG, self.state.provider, exc or "timeout",
                               "stale" if previous else "no")
                entry = self._stale(previous, scope, query)
                self._note_recall(session_key, RecallNote(
                    self.state.provider, "unavailable",
                    detail="timed out" if isinstance(exc, TimeoutError) else "failed"),
                    scope.key, audience, turn_id)
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                self.state.health.retrieve_stats.add(latency_ms)
                self.state.health.reads_failing_since = None
                text = result.formatted_context or ""
                entry = CacheEntry(text, scope.key, self.state.provider, time.time(), query)
                self._note_recall(session_key, RecallNote(
                    self.state.provider, "recalled", items=len(result.shown),
                    tokens=count_tokens_by_line(text) if text else 0, latency_ms=latency_ms),
                    scope.key, audience, turn_id)
        entry.in_system = who.shared  # a shared chat's recall never rides on the message
        self._remember(session_key, entry)
        return entry

    async def _say_pending(self, session_key: str) -> None:
        """On nanobot's own terminal: earlier turns of this chat that are not stored yet
        (a one-shot ``nanobot agent -m`` leaves a turn whose extraction outlasts the
        process; the next run delivers it while it answers), so a recall that misses
        them does not pass for the memory's whole answer."""
        try:
            queued = await asyncio.to_thread(self.state.queues.outbox.queued_turns,
                                             self.state.provider, session_key)
        except Exception:  # an outbox problem is /memory-health's to report
            return
        pending = sum(1 for status in queued.values() if status == "pending")
        if pending:
            print(f"[memory: {pending} earlier turn(s) of this chat are still being saved "
                  f"to '{self.state.provider}'; this answer's recall does not include them]",
                  flush=True)

    def _note_recall(self, session_key: str, note: RecallNote, scope_key: str,
                     audience: Audience, turn_id: str | None) -> None:
        """What memory did for this turn: the per-turn line and ``/memory-health``. A
        recall's counts are the scope's (how much one person has stored), so that line goes
        through the gate like any memory text: a reply is read by everyone in the chat."""
        piece = (Piece.memory(note.line(), scope_key, withheld=note.withheld_line())
                 if note.outcome == "recalled" else Piece.plain(note.line()))
        self.recall_notes[session_key] = (turn_id, piece, audience.in_history())
        while len(self.recall_notes) > CACHE_SESSIONS:
            self.recall_notes.pop(next(iter(self.recall_notes)))
        self.scope_notes[scope_key] = note
        while len(self.scope_notes) > CACHE_SESSIONS:
            self.scope_notes.pop(next(iter(self.scope_notes)))

    def last_recall_for(self, ctx: Any) -> Piece | None:
        """The asker's own last recall (``/memory-health``), as a piece of their scope."""
        memory = self.state.settings.memory
        if memory is None:
            return None
        try:
            scope_key = command_scope(memory, ctx)[0].key
        except ValueError:
            return None
        note = self.scope_notes.get(scope_key)
        return None if note is None else Piece.memory(note.health_line(), scope_key)

    def turn_line_for(self, channel: str, session_key: str, turn_id: str) -> str | None:
        """The opt-in per-turn line for a turn's reply (taken once: one turn, one line):
        this very turn's note only, never one an earlier turn left (a reply nanobot
        never assembled: the model answered with its ``message`` tool, a /stop)."""
        plugin = self.state.settings.plugin
        if not plugin.turn_line or self.state.status != "active":
            return None
        if plugin.turn_line_channels and channel not in plugin.turn_line_channels:
            return None
        noted = self.recall_notes.pop(session_key, None)
        if noted is None or noted[0] != turn_id:
            return None
        return release([noted[1]], noted[2]) or None

    def _remember(self, session_key: str, entry: CacheEntry) -> None:
        self.state.cache[session_key] = entry
        self.state.cache.move_to_end(session_key)
        while len(self.state.cache) > CACHE_SESSIONS:
            self.state.cache.popitem(last=False)

    async def search(
        self, *, query: str, limit: int | None, session_key: str | None, channel: str,
        chat_id: str, sender_id: str | None, attributes: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """The ``memory_search`` tool: one retrieve in the turn's own scope, formatted by
        the same budgeted formatter; a read only (never a write, never the cache). Never
        in a shared chat: a tool result is saved in the session's history, which every
        member's later turns replay."""
        if self.state.status != "active":
            return "long-term memory search is not available (nanobot's own memory is in use)"
        if not query.strip():
            return "memory_search needs a non-empty query"
        if not session_key or not seams.session_persists(self.state.sessions, session_key):
            return "this session has no long-term memory"
        who = await self.state.audiences.attribute(
            session_key=session_key, channel=channel, chat_id=chat_id, sender_id=sender_id,
            metadata=metadata)
        if who.person is None:
            return "this turn belongs to no person, so it has no long-term memory to search"
        audience = self.state.audiences.audience_of(who, channel=channel, chat_id=chat_id,
                                                    session_key=session_key, attributes=attributes)
        if who.shared and not self.state.audiences.group_scope:
            # a tool result is saved in the session's history, which everyone who can read
            # this chat replays; with group_recall "personal" the recall rides in the
            # system prompt only, which a tool result cannot
            return ("memory_search is not available in a chat that is not known to be yours "
                    "alone (a result would be saved in its history); ask in a direct chat")
        try:
            request = self._request(query=query, channel=channel, chat_id=chat_id,
                                    sender_id=who.person, session_key=session_key,
                                    attributes=attributes, limit=limit)
        except ValueError as exc:
            logger.warning("{}: memory_search scope cannot be built: {}", LOG, exc)
            return "memory_search is not available: this chat's memory scope cannot be built"
        if not audience.in_history().admits(request.scope.key):  # a result is saved there
            return "memory_search is not available in this chat"
        if not await self._ready_for(request.scope):
            return "long-term memory is not reachable right now"
        assert self.state.adapter is not None
        try:
            result = await asyncio.wait_for(self.state.adapter.retrieve(request),
                                            self.state.settings.plugin.recall_timeout_s)
        except (AdapterError, TimeoutError) as exc:
            self.state.health.note_read_failure("memory_search", exc, "memory_search timed out")
            return "memory search failed (the gateway's log has the details)"
        return release([Piece.memory(result.formatted_context
                                     or f"no memories found for: {query}", request.scope.key,
                                     withheld="memory_search is not available in this chat")],
                       audience.in_history())

    def _request(self, *, query: str, channel: str, chat_id: str, sender_id: str | None,
                 session_key: str, attributes: dict[str, Any] | None,
                 limit: int | None = None) -> RetrieveRequest:
        """The retrieve for a chat (recall and ``memory_search`` alike): its scope, the
        configured budget (``limit`` caps the items), tags and as-of from the request."""
        memory = self.state.settings.memory
        assert memory is not None
        scope, session_id = chat_scope(memory, channel=channel, chat_id=chat_id,
                                       sender_id=sender_id, session_key=session_key,
                                       attributes=attributes)
        budget = memory.budget.to_budget()
        if limit is not None:
            budget = budget.model_copy(update={"max_items": max(1, min(limit, 50))})
        return RetrieveRequest.with_tags(tags_from(attributes), query=query, scope=scope,
                                         session_id=session_id, budget=budget,
                                         as_of=as_of_from(attributes))

    async def _ready_for(self, scope: MemoryScope) -> bool:
        """Provider built and scope set up (a startup cost, under ``startup_timeout_s``)."""
        try:
            async with asyncio.timeout(self.state.settings.plugin.startup_timeout_s):
                if not await self._ensure_adapter():
                    return False
                await self._ensure_scope(scope)
            return True
        except (AdapterError, TimeoutError) as exc:
            self.state.health.note_read_failure(
                "setup_scope", exc, f"provider start took longer than "
                f"{self.state.settings.plugin.startup_timeout_s}s")
            return False

    def _stale(self, previous: CacheEntry | None, scope: MemoryScope, query: str) -> CacheEntry:
        provider = self.state.provider
        if previous and previous.scope_key == scope.key and previous.provider == provider:
            return CacheEntry(previous.text, previous.scope_key, previous.provider,
                              previous.at, previous.query, stale=True)
        return CacheEntry("", scope.key, self.state.provider, time.time(), query, stale=True)


    async def on_shared_turn_persisted(self, event: Any) -> None:
        """Bus subscriber: in a session not known to be one person's, take the plugin's
        recalled memory (and what ``memory_search`` returned) out of the saved history, so
        no later turn replays it: blocks an older version left, or saved before the chat
        was known to be shared. Never raises."""
        try:
            ctx = event.context
            if self.state.status != "active" or not ctx.session_key:
                return
            who = await self.state.audiences.attribute(
                session_key=ctx.session_key, channel=ctx.channel, chat_id=ctx.chat_id,
                sender_id=event.sender_id, metadata=ctx.metadata)
            if who.shared:
                await asyncio.to_thread(seams.strip_memory_blocks, self.state.sessions,
                                        ctx.session_key)
        except Exception as exc:
            self.state.health.note_error("strip_shared_history", exc, retryable=False)
            logger.exception("{}: could not clean a shared chat's history", LOG)
