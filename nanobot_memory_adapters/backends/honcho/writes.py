"""Honcho writes: one event's messages through ``session.add_messages``, bulk runs of
events in the server's batches of 100, and the replay check that keeps a re-delivered
event from being stored twice (Honcho's message list filtered by metadata)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from honcho.api_types import MessageCreateParams
from honcho.session import Session

from nanobot_memory_adapters.backends.honcho.config import MAX_BATCH, ScopeState
from nanobot_memory_adapters.base import NativeWrite
from nanobot_memory_adapters.contract import MemoryEvent, MemoryScope


class HonchoWrites:
    """Writes one event or a run of events into the scope's session. The store builds it
    and offers it (``record``, and ``record_batch`` for the wrapper's bulk ingest); it
    reaches Honcho through the store's scope state and sessions, and tells the deriver's
    readiness that a write was accepted."""

    def __init__(
        self,
        *,
        scope_state: Callable[[MemoryScope], Awaitable[ScopeState]],
        ensure_session: Callable[[MemoryScope, ScopeState, str], Awaitable[Session]],
        state_key: Callable[[MemoryScope], str],
        mark_dirty: Callable[[str], None],
    ) -> None:
        self._scope_state = scope_state
        self._ensure_session = ensure_session
        self.state_key = state_key
        self._mark_dirty = mark_dirty

    def to_messages(self, state: ScopeState, event: MemoryEvent
                    ) -> tuple[list[MessageCreateParams], int]:
        base: dict[str, Any] = {
            "event_id": event.event_id, "turn_id": event.turn_id, "run_id": event.run_id,
            "user_id": event.user_id, "agent_id": event.agent_id,
            "session_id": event.session_id, **event.tags(),
        }
        if event.metadata:
            base["event_metadata"] = event.metadata
        out: list[MessageCreateParams] = []
        skipped = 0
        for index, m in enumerate(event.messages):
            if m.role == "system":  # instructions, not conversation: not memory
                skipped += 1
                continue
            peer = state.user_peer if m.role == "user" else state.assistant_peer
            meta = {**base, "role": m.role, "index": index}
            if m.name:
                meta["name"] = m.name
            if m.tool_call_id:
                meta["tool_call_id"] = m.tool_call_id
            out.append(MessageCreateParams(content=m.content, peer_id=peer, metadata=meta,
                                           created_at=event.timestamp))
        return out, skipped

    async def record(self, event: MemoryEvent) -> NativeWrite:
        """One event's messages, those Honcho does not hold yet, in calls of 100."""
        scope = event.scope()
        state = await self._scope_state(scope)
        session = await self._ensure_session(scope, state, event.session_id)
        messages, skipped = self.to_messages(state, event)
        stored = await self.stored_messages(session, event)
        missing = [m for m in messages if (m.metadata or {}).get("index") not in stored]
        warnings = [f"skipped {skipped} system message(s)"] if skipped else []
        if stored:
            warnings.append(f"event {event.event_id} is already in Honcho ({len(stored)} of "
                            f"{len(messages)} messages); added {len(missing)}")
        ids: list[str] = [stored[i] for i in sorted(stored)]
        for start in range(0, len(missing), MAX_BATCH):
            created = await session.aio.add_messages(missing[start:start + MAX_BATCH])
            ids += [m.id for m in created]
        if missing:
            self._mark_dirty(self.state_key(scope))
        return NativeWrite(
            status="queued" if ids else "committed",
            native_ids=ids,
            native_operation="session.add_messages",
            native_request={"workspace": state.workspace, "session": session.id,
                            "messages": len(messages), "batches": -(-len(messages) // MAX_BATCH)},
            warnings=warnings,
            stored_nothing=not ids,  # a turn of system messages only
        )

    @staticmethod
    async def stored_messages(session: Session, event: MemoryEvent) -> dict[Any, str]:
        """Messages of this event Honcho already holds, by their index in the event: a
        process killed after ``add_messages`` but before the outbox heard back replays the
        event, and only what is missing is added (metadata containment filter, a native
        read; Honcho's add has no idempotency key)."""
        page = await session.aio.messages(filters={"metadata": {"event_id": event.event_id}},
                                          size=100)
        stored: dict[Any, str] = {}
        while page is not None:
            stored |= {(m.metadata or {}).get("index"): m.id for m in page.items}
            page = await page.get_next_page()
        return stored

    async def record_batch(self, batch: list[MemoryEvent]) -> list[NativeWrite]:
        """Bulk ingest: one ``add_messages`` call per 100 messages of a run of events that
        share scope and session (the server's limit). Like ``record_event`` it adds only
        the messages Honcho does not hold yet (a replayed session stores each once)."""
        scope, session_id = batch[0].scope(), batch[0].session_id
        state = await self._scope_state(scope)
        session = await self._ensure_session(scope, state, session_id)
        flat: list[tuple[str, MessageCreateParams]] = []
        skipped_by_event: dict[str, list[str]] = {}
        ids: dict[str, list[str]] = {}
        # a session with no messages holds none of these: one read instead of one per event
        empty = not (await session.aio.messages(size=1)).items
        for e in batch:
            msgs, skipped = self.to_messages(state, e)
            stored = {} if empty else await self.stored_messages(session, e)
            missing = [m for m in msgs if (m.metadata or {}).get("index") not in stored]
            flat += [(e.event_id, m) for m in missing]
            ids[e.event_id] = [stored[i] for i in sorted(stored)]
            notes = skipped_by_event.setdefault(e.event_id, [])
            if skipped:  # the same warnings record_event gives
                notes.append(f"skipped {skipped} system message(s)")
            if stored:
                notes.append(f"event {e.event_id} is already in Honcho ({len(stored)} of "
                             f"{len(msgs)} messages); added {len(missing)}")
        for start in range(0, len(flat), MAX_BATCH):
            chunk = flat[start:start + MAX_BATCH]
            created = await session.aio.add_messages([m for _, m in chunk])
            for (event_id, _), msg in zip(chunk, created, strict=True):
                ids[event_id].append(msg.id)
        if flat:
            self._mark_dirty(self.state_key(scope))
        request = {"workspace": state.workspace, "session": session.id, "events": len(batch)}
        return [
            NativeWrite("queued" if ids[e.event_id] else "committed", ids[e.event_id],
                        "session.add_messages(bulk)", request,
                        skipped_by_event.get(e.event_id, []),
                        stored_nothing=not ids[e.event_id])
            for e in batch
        ]

