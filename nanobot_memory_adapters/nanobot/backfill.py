"""Backfill: replay nanobot's own session files into a provider.

nanobot keeps every session on disk (the ledger); a provider is a view over it that can
be rebuilt. A backfill reads the sessions with nanobot's own ``SessionManager``, cuts
them into turns (a user message and what followed it), builds each turn's event with
its original time and the same scope mapping as live turns (``turns.event_from_messages``;
who spoke comes from the plugin's per-turn record, the outbox's ``turn_sender``, since
nanobot's files do not say; a group turn it did not see is skipped, never guessed), and
queues the events in the shared outbox — durable, so a killed backfill resumes
where it stopped. Delivery then goes through the provider's bulk ingest where it has it;
a row that was in flight when a process died is delivered again on its own, through
``record_event``, whose replay checks keep it from being stored twice.

Event ids come from the session key, the message index and its time; turns the provider
already holds (the outbox's ``delivered_turn``, which pruning keeps) or has queued are
skipped, so a second backfill adds nothing whatever was pruned; turns of forgotten scopes
are skipped unless asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nanobot_memory_adapters.config import MemoryConfig
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryAdapter,
    MemoryEvent,
    MemoryScope,
    supports,
)
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot import seams
from nanobot_memory_adapters.nanobot.chat_book import CHATS_FILE, ChatBook
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.people import (
    HEARTBEAT_SESSION,
    flagged_shared,
    session_is_the_chats,
)
from nanobot_memory_adapters.nanobot.turns import event_from_messages, is_recorded
from nanobot_memory_adapters.redaction import redact_text

IN_FLIGHT = "backfill: in flight"
BATCH = 50


@dataclass
class BackfillPlan:
    events: list[tuple[str, MemoryEvent]] = field(default_factory=list)  # (session key, event)
    sessions: int = 0
    turns: int = 0
    already_delivered: int = 0  # the provider has them (live or an earlier backfill)
    already_queued: int = 0  # a row for the provider waits in the outbox (pending, failed)
    guessed_identity: list[str] = field(default_factory=list)  # sessions never seen live
    forgotten: int = 0  # turns of forgotten scopes, skipped
    forgotten_scopes: set[str] = field(default_factory=set)
    unknown_sender: int = 0  # turns of group sessions whose sender is not known, skipped
    unknown_sender_sessions: set[str] = field(default_factory=set)
    nobodys: int = 0  # turns nobody typed (the gateway's heartbeat), skipped

    def notes(self, *, name_scopes: bool = True) -> list[str]:
        """What was skipped and why, one line each (CLI and chat). A scope key names a
        person (a phone number, who asked to be forgotten): a chat's reply, read by whoever
        is in the chat, gets the counts only (``name_scopes=False``)."""
        lines = []
        if self.forgotten:
            which = (f" ({', '.join(sorted(self.forgotten_scopes))})" if name_scopes else "")
            lines.append(f"{self.forgotten} turn(s) of {len(self.forgotten_scopes)} forgotten "
                         f"scope(s){which} skipped: they "
                         "were forgotten on request; --include-forgotten brings them back")
        if self.unknown_sender:
            lines.append(f"{self.unknown_sender} turn(s) in {len(self.unknown_sender_sessions)}"
                         " group session(s) skipped: several people speak there (or may: "
                         "a chat never seen live that is not nanobot's CLI or a Telegram "
                         "private chat) and the plugin did not see who said these turns "
                         "(they are never filed under a guessed sender)")
        if self.nobodys:
            lines.append(f"{self.nobodys} turn(s) of nanobot's heartbeat session skipped: "
                         "nobody typed them (live, they are not recorded either)")
        if self.guessed_identity:
            lines.append(f"{len(self.guessed_identity)} session(s) were never seen by the "
                         "plugin; nanobot's CLI sessions are filed as its one user "
                         "(cli-user), a Telegram private chat as the user its id is")
        return lines


def session_turns(messages: Sequence[Mapping[str, Any]], *, include_tools: bool = False
                  ) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
    """(index of the turn's user message, the turn's messages) in session order."""
    start: int | None = None
    turn: list[Mapping[str, Any]] = []
    for index, message in enumerate(messages):
        if seams.is_internal_message(message) or seams.is_synthetic_message(message):
            continue
        if message.get("role") == "user":
            if start is not None:
                yield start, turn
            start, turn = index, []
        if start is not None and is_recorded(message, include_tools=include_tools):
            turn.append(message)
    if start is not None:
        yield start, turn


CLI_SENDER = "user"  # the sender id nanobot 0.3.5's CLI gives every turn (one-shot and not)


def _one_persons_by_id(channel: str, chat_id: str) -> bool:
    """A session never seen live is one person's only when its id says so: nanobot's CLI,
    or a Telegram private chat (a positive id, its user's). Any other chat may have had
    several people in it (a Matrix room, an e-mail thread), and its turns' senders are
    not known."""
    return channel == "cli" or (channel == "telegram" and chat_id.isdigit())


def _identity(outbox: Outbox, key: str) -> tuple[str, str, str | None, bool]:
    """(channel, chat id, sender id, known): from the plugin's record of the session,
    else as nanobot itself builds a session it was not seen in: its CLI takes a session
    id without ``:`` as a chat of the ``cli`` channel and always sends as ``user`` (so a
    terminal session lands in ``cli-user``, the scope its live turns use); on another
    channel the chat stands for the sender (a Telegram private chat's id is its user's)."""
    known = outbox.identity(key)
    if known is not None:
        return (*known, True)
    channel, colon, chat_id = key.partition(":")
    if not colon:
        return "cli", key, CLI_SENDER, False
    if channel == "cli":
        return "cli", chat_id, CLI_SENDER, False
    return channel or "unknown", chat_id or key, chat_id or None, False


def plan_backfill(
    manager: Any, memory: MemoryConfig, outbox: Outbox, provider: str, *,
    since: datetime | None = None, session: str | None = None, include_tools: bool = False,
    include_forgotten: bool = False,
) -> BackfillPlan:
    """Every turn of nanobot's sessions (or one session) as events, oldest first; turns
    the provider has or has queued, turns of forgotten scopes (unless
    ``include_forgotten``) and group turns whose sender is unknown are left out, counted."""
    plan = BackfillPlan()
    forgotten = {} if include_forgotten else outbox.forgotten()
    book = ChatBook(outbox.path.parent / CHATS_FILE)  # beside the outbox (one data dir)
    keys = [session] if session else sorted(str(s["key"]) for s in manager.list_sessions())
    try:
        _plan_sessions(plan, manager, memory, outbox, provider, keys, book, forgotten,
                       since=since, include_tools=include_tools)
    finally:
        book.close()
    plan.events.sort(key=lambda pair: pair[1].timestamp)
    return plan


def _plan_sessions(plan: BackfillPlan, manager: Any, memory: MemoryConfig, outbox: Outbox,
                   provider: str, keys: list[str], book: ChatBook,
                   forgotten: dict[str, Any], *, since: datetime | None,
                   include_tools: bool) -> None:
    for key in keys:
        if key.startswith("dream:") or not seams.session_persists(manager, key):
            continue
        stored = manager.get_or_create(key)
        if key == HEARTBEAT_SESSION:
            # nobody's turns (live, never recorded); its key has no ``:``, so it would
            # otherwise read as a CLI session and be filed as the terminal's user
            plan.nobodys += sum(1 for index, turn in session_turns(
                stored.messages, include_tools=include_tools) if _in_window(
                    memory, turn, key, index, since))
            continue
        channel, chat_id, sender_id, known = _identity(outbox, key)
        senders = outbox.turn_senders(key)
        # Several people spoke in this session (a group chat): a turn the plugin did not
        # see live has no known sender.
        several = len({who for _, _, who in senders.values()} | ({sender_id} if known
                                                                  else set())) > 1
        # ...or the chat is a group by its id (a negative Telegram chat id), even if only
        # one member spoke while the plugin watched: the others' turns are never guessed
        several = several or flagged_shared(channel, chat_id, None)
        # ...or it was never seen live and nothing shows it is one person's: unknown
        # means shared, and its turns are never filed under a guessed person
        several = several or (not known and not _one_persons_by_id(channel, chat_id))
        # ...or live turns never showed it one person's (a group flag, a second person, or
        # no direct flag: a Matrix room not declared in direct_chats; live, a turn there
        # without a person is nobody's, so is it here), or it is not the chat's own
        # session (nanobot's unified session, an API client's): a sender seen there once
        # is not the sender of the turns the plugin did not see
        facts = book.recorded(key)
        several = several or (facts is not None and facts.one_person is None) or (
            known and not session_is_the_chats(key, channel, chat_id))
        delivered = outbox.delivered_turns(provider, key)
        queued = outbox.queued_turns(provider, key)
        plan.sessions += 1
        if not known:
            plan.guessed_identity.append(key)
        for index, turn in session_turns(stored.messages, include_tools=include_tools):
            # nanobot's /new starts a session's messages again at index 0: the first
            # message's own time keeps ids of a later conversation distinct.
            stamp = str(turn[0].get("timestamp") or "")
            digest = hashlib.sha256(f"{key}\x00{index}\x00{stamp}".encode()).hexdigest()[:32]
            event = _turn_event(memory, turn, key, index, digest, (channel, chat_id, sender_id))
            if event is None:
                continue
            if since is not None and event.timestamp < since:
                continue
            plan.turns += 1
            at = event.timestamp.isoformat()
            who = senders.get(at)
            if who is None and several:
                plan.unknown_sender += 1
                plan.unknown_sender_sessions.add(key)
                continue
            if who is not None and who != (channel, chat_id, sender_id):
                event = _turn_event(memory, turn, key, index, digest, who)
                assert event is not None
            scope_key = event.scope().key
            if scope_key in forgotten and event.timestamp.timestamp() <= forgotten[scope_key]:
                plan.forgotten += 1
                plan.forgotten_scopes.add(scope_key)
                continue
            if at in delivered:
                plan.already_delivered += 1
                continue
            if at in queued:
                plan.already_queued += 1
                continue
            plan.events.append((key, event))


def _in_window(memory: MemoryConfig, turn: list[Mapping[str, Any]], key: str, index: int,
               since: datetime | None) -> bool:
    """Whether a turn would be a backfill's (something said, not before ``--since``; its
    time as its event would carry it): the skipped count counts what the plan would
    otherwise have filed."""
    event = _turn_event(memory, turn, key, index, "window", ("cli", "direct", None))
    return event is not None and (since is None or event.timestamp >= since)


def _turn_event(memory: MemoryConfig, turn: list[Mapping[str, Any]], key: str, index: int,
                digest: str, who: tuple[str, str, str | None]) -> MemoryEvent | None:
    return event_from_messages(
        memory=memory, chosen=turn, event_id=f"nb-bf-{digest}", turn_id=f"backfill-{index}",
        channel=who[0], chat_id=who[1], sender_id=who[2], session_key=key)


def enqueue(outbox: Outbox, provider: str, plan: BackfillPlan, *,
            include_forgotten: bool = False) -> int:
    """Queue the plan's events (durably); returns how many were new. Turns of a scope
    forgotten after they were said are refused by the outbox itself, unless
    ``include_forgotten`` (the plan was made with it)."""
    return sum(outbox.enqueue(provider, event, key, include_forgotten=include_forgotten)
               for key, event in plan.events)


async def deliver(
    adapter: MemoryAdapter, outbox: Outbox, provider: str, *,
    progress: Callable[[int], None] | None = None, batch: int = BATCH,
) -> tuple[int, int, list[MemoryScope]]:
    """Deliver the provider's pending rows: (delivered, failed, the scopes written).

    Rows are marked in flight before a bulk call; a row found in flight (its process
    died mid-call) goes through ``record_event`` on its own, whose replay check keeps
    it from being stored twice. A retryable failure stops the pass (rows stay pending)."""
    delivered = failed = 0
    scopes: dict[str, MemoryScope] = {}
    while rows := outbox.pending(provider, batch):
        fresh = [r for r in rows if r.attempts == 0]
        bulk = adapter if fresh and supports(adapter, "bulk_ingest") else None
        chosen = fresh if bulk is not None else rows[:1]
        events = [r.event() for r in chosen]
        for r in chosen:
            outbox.mark_retry(r.seq, IN_FLIGHT)
        try:
            receipts = (await bulk.record_events(events) if bulk is not None
                        else [await adapter.record_event(events[0])])
        except AdapterError as exc:
            if exc.retryable:
                break
            for r in chosen:
                outbox.mark_failed(r.seq, str(exc))
            failed += len(chosen)
            continue
        stop = False
        for row, event, receipt in zip(chosen, events, receipts, strict=True):
            if receipt.accepted:
                outbox.mark_delivered(row.seq, status=receipt.status,
                                      native_ids=receipt.native_ids,
                                      latency_ms=receipt.latency_ms)
                delivered += 1
                scopes[event.scope().key] = event.scope()
            elif receipt.retryable:
                stop = True
            else:
                outbox.mark_failed(row.seq, str(receipt.error))
                failed += 1
        if progress is not None:
            progress(delivered + failed)
        if stop:
            break
    return delivered, failed, list(scopes.values())


NOTHING_TO_WAIT_FOR = "readiness: the provider stores synchronously (nothing to wait for)"


async def wait_ready(adapter: MemoryAdapter, scopes: Sequence[MemoryScope],
                     timeout_s: float, *, detail: bool = True) -> list[str]:
    """The readiness wait at the end, one line per scope (what the provider says). A wait
    that raised is that scope's line (``failed``), after every turn was delivered: not a
    stopped delivery. Its error text (a backend's) only where ``detail`` (the terminal)."""
    if not supports(adapter, "readiness"):
        return [NOTHING_TO_WAIT_FOR]
    lines = []
    for scope in scopes:
        try:
            state = await adapter.wait_until_ready(scope, timeout_s)
        except Exception as exc:
            said = redact_text(str(exc))
            logger.warning("readiness wait for {} failed: {}", scope.key, said)
            why = f" ({said})" if detail else " (the log has why)"
            lines.append(f"readiness {scope.key}: failed{why}")
            continue
        lines.append(f"readiness {scope.key}: {state.status}")
    return lines


def all_ready(lines: Sequence[str]) -> bool:
    """Whether ``wait_ready``'s lines say every scope can be read (or nothing waits)."""
    return all(line == NOTHING_TO_WAIT_FOR or line.endswith(": ready") for line in lines)
