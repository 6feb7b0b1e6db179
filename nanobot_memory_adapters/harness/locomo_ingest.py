"""Recording a LoCoMo conversation into a provider: each session's turns in order (bulk
where declared), one trace line per event naming its turn, persona and status."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from nanobot_memory_adapters.contract import (
    ACCEPTED_WRITE_STATUSES,
    MemoryAdapter,
    MemoryEvent,
    Trace,
    WriteReceipt,
    supports,
)
from nanobot_memory_adapters.harness.datasets.locomo import (
    Conversation,
    Session,
    Turn,
)
from nanobot_memory_adapters.harness.locomo_mapping import (
    Persona,
    turn_event,
)
from nanobot_memory_adapters.harness.locomo_state import UnitState
from nanobot_memory_adapters.harness.prepared import Prepared
from nanobot_memory_adapters.harness.trace_sink import (
    AnnotatingSink,
    error_text,
    failure_trace,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.tokens import count_tokens

if TYPE_CHECKING:
    pass

#: Turns a provider's ``ingest_lookahead`` is given at once: whole sessions, until the next
#: would pass this (one session at least). A LoCoMo conversation (<= ~700 turns) or a
#: LongMemEval-S haystack (~500) is one window; the window bounds what is held (a MiniLM
#: vector as Python floats is ~12 KiB).
LOOKAHEAD_TURNS = 1024


def lookahead_window(sessions: Sequence[Session], number: int) -> list[Session]:
    """The window that holds session ``number``: the conversation's sessions cut from its
    first one, greedily, into windows of whole sessions up to ``LOOKAHEAD_TURNS`` turns.

    The cut never depends on where recording starts, so a unit resumed mid-way embeds the
    same batch of texts an uninterrupted run did: a batched vector can differ from another
    batch's in its last bits (padding; up to ~3e-7 measured on conv-26), which can swap
    two memories of near-equal score. On the synthetic kill test's data the vectors were
    the same either way; the cut removes the possibility, not a measured difference."""
    window: list[Session] = []
    turns = 0
    for session in sessions:
        if window and turns + len(session.turns) > LOOKAHEAD_TURNS:
            if any(s.number == number for s in window):
                return window
            window, turns = [], 0
        window.append(session)
        turns += len(session.turns)
    return window if any(s.number == number for s in window) else []


class LocomoIngest:
    """Records a conversation's sessions into one provider for a bench unit: the
    lookahead window, bulk or per-event writes, their receipts as trace lines, and the
    ingest measurements in the unit's ``UnitState``. A collaborator the unit runner
    owns (built once the unit's state is final, resumed or fresh) and calls."""

    def __init__(self, p: Prepared, conv: Conversation, personas: list[Persona],
                 unit: UnitState, dia_of_event: dict[str, str]) -> None:
        self.p = p
        self.adapter: MemoryAdapter = p.adapter
        self.sink: AnnotatingSink = p.sink
        self.conv = conv
        self.personas = personas
        self.unit = unit  # mutated in place: the runner reads the same object
        self.dia_of_event = dia_of_event

    def _record_line(
        self, trace: Trace, turn: Turn, event: MemoryEvent, status: str, copy: int
    ) -> None:
        self.dia_of_event[event.event_id] = turn.dia_id
        self.sink.write(
            trace,
            kind="record",
            phase="ingest",
            session=turn.session,
            dia_id=turn.dia_id,
            event_id=event.event_id,
            persona=event.user_id,
            speaker_copy=copy,
            text=turn.text,
            # what was stored, where it is more than the turn's words (an image turn's
            # caption): what a metric of the section's own text reads
            **({"content": turn.content} if turn.content != turn.text else {}),
            distinctive=turn.distinctive,
            status=status,
        )

    _lookahead: AbstractAsyncContextManager[None] | None = None
    _lookahead_sessions: frozenset[int] = frozenset()

    async def look_ahead(self, session: Session) -> None:
        """Before recording ``session``: if the provider declares ``ingest_lookahead`` and
        no open window covers that session, close the window and open the one that holds
        it (``lookahead_window``), for every persona. Its time counts as ingest time
        (``lookahead_s`` says how much of it)."""
        adapter = self.adapter
        if (session.number in self._lookahead_sessions
                or not supports(adapter, "ingest_lookahead")):
            return
        await self.end_lookahead()
        window = lookahead_window(self.conv.sessions, session.number)
        events = [turn_event(self.conv, t, persona.scope, persona.speaker)
                  for persona in self.personas for s in window for t in s.turns]
        started = time.perf_counter()
        # the window counts as covered even when the lookahead fails: it is not retried
        # for each of its sessions
        self._lookahead_sessions = frozenset(s.number for s in window)
        try:
            context = adapter.ingest_lookahead(events)
            await context.__aenter__()
        except Exception as exc:  # a hint: the sessions are recorded as they would be
            logger.warning("{}: ingest_lookahead failed ({}); recording without it",
                           self.p.name, error_text(exc))
        else:
            self._lookahead = context
        spent = time.perf_counter() - started
        self.unit.ingest_s += spent
        self.unit.lookahead_s = (self.unit.lookahead_s or 0.0) + spent

    async def end_lookahead(self) -> None:
        """Leave the open window, if any (as the contract says: without exception info,
        whether the unit ends well or not; a failure to leave is logged, never raised)."""
        context, self._lookahead = self._lookahead, None
        self._lookahead_sessions = frozenset()
        if context is not None:
            try:
                await context.__aexit__(None, None, None)
            except Exception as exc:
                logger.warning("{}: ending ingest_lookahead failed ({})", self.p.name,
                               error_text(exc))

    async def record_session(self, turns: Sequence[Turn], persona: Persona, copy: int) -> None:
        if not turns:
            return
        events = [turn_event(self.conv, t, persona.scope, persona.speaker) for t in turns]
        # what is sent, counted outside the timed part (tokens/s = these over ingest_s)
        self.unit.ingest_tokens = (self.unit.ingest_tokens or 0) + sum(
            count_tokens(t.content) for t in turns)
        started = time.perf_counter()
        if supports(self.adapter, "bulk_ingest"):
            receipts: list[WriteReceipt | BaseException] = []
            t0 = time.perf_counter()
            with self.sink.capture() as held:
                try:
                    receipts = list(await self.adapter.record_events(events))
                except Exception as exc:
                    receipts = [exc] * len(events)
            ms = (time.perf_counter() - t0) * 1000
            if len(receipts) != len(events):
                receipts = [
                    RuntimeError(
                        f"record_events returned {len(receipts)} receipts for {len(events)} events"
                    )
                ] * len(events)
            self.unit.record_latency_ms.append(ms)
            self.unit.record_latency_per_event_ms.append(ms / len(events))
            written = self._receipt_lines(turns, events, receipts, copy)
            self.sink.flush(held, written)
        else:
            for turn, ev in zip(turns, events, strict=True):
                t0 = time.perf_counter()
                with self.sink.capture() as held:
                    try:
                        receipt: WriteReceipt | BaseException = await self.adapter.record_event(ev)
                    except Exception as exc:
                        receipt = exc
                ms = (time.perf_counter() - t0) * 1000
                self.unit.record_latency_ms.append(ms)
                self.unit.record_latency_per_event_ms.append(ms)
                written = self._receipt_lines([turn], [ev], [receipt], copy)
                self.sink.flush(held, written)
        self.unit.events += len(events)
        self.unit.ingest_s += time.perf_counter() - started

    def _receipt_lines(
        self,
        turns: Sequence[Turn],
        events: Sequence[MemoryEvent],
        receipts: Sequence[WriteReceipt | BaseException],
        copy: int,
    ) -> set[str]:
        written: set[str] = set()
        for turn, ev, receipt in zip(turns, events, receipts, strict=True):
            if isinstance(receipt, BaseException):
                self.unit.record_failures += 1
                trace = failure_trace(
                    self.p.name,
                    self.adapter,
                    "record_event",
                    error_text(receipt),
                    ev.event_id,
                    ev.scope().key,
                )
                self._record_line(trace, turn, ev, "failed", copy)
                continue
            if receipt.status not in ACCEPTED_WRITE_STATUSES:
                self.unit.record_failures += 1
            elif receipt.stored_nothing and self.unit.stored_nothing is not None:
                self.unit.stored_nothing += 1
            self._record_line(receipt.trace, turn, ev, receipt.status, copy)
            written.add(receipt.trace.trace_id)
        return written

