"""Move turns recorded under an old scope name to the scope their person has now.

Scope ids became injective (``scope.plain_id``) and a Telegram person is their numeric id:
a sender whose id was plain keeps their scope; anyone else (``josé``, ``张三``,
``alice+bank@…``, a Telegram user with a username) gets a new one, and an old name may
hold several people's turns. The plugin never reads an old name for someone else (it
cannot tell whose turns it holds). This re-files the turns the outbox still holds — each
event keeps the channel and sender it came from — under the scope the current rule gives
that sender: new events (deterministic ids, so a second run adds nothing), queued for the
provider and delivered by the plugin like any turn.

An old name that is still someone's scope (``jos`` kept ``discord-jos``, which also holds
``josé``'s old turns) is *shared*: its owner would keep seeing the others' turns. With
``reset_shared`` such a scope is emptied through the provider's own deletion and its
owner's turns are queued into it again (a run stopped part-way is finished by the next
one, which queues the copies still missing without emptying it again). Other old names
are left as they are (nobody's scope any more; ``nanobot-memory forget`` deletes them).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from nanobot_memory_adapters.config import MemoryConfig
from nanobot_memory_adapters.contract import MemoryAdapter, MemoryScope
from nanobot_memory_adapters.events import MemoryEvent
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.people import is_person, service_account
from nanobot_memory_adapters.nanobot.turns import chat_scope


@dataclass
class Migration:
    moved: int = 0  # events queued under their new scope
    already: int = 0  # moved by an earlier run
    unchanged: int = 0  # recorded under the scope the rule still gives
    no_person: int = 0  # cron/system turns recorded under a shared name: not moved
    forgotten: int = 0  # turns whose new scope was forgotten after they were said: not moved
    unreadable: int = 0  # rows without the channel and sender they came from
    # old scope key -> the new scope keys its turns went to
    old_scopes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    # old scope key still some sender's scope -> that owner's events in it
    shared: dict[str, list[MemoryEvent]] = field(default_factory=lambda: defaultdict(list))
    reset: list[str] = field(default_factory=list)  # shared scopes emptied and re-filled
    refiled: int = 0  # owners' turns queued again into their emptied scope
    # shared scopes an interrupted earlier run emptied and did not finish re-filling
    resumed: list[str] = field(default_factory=list)
    _scopes: dict[str, MemoryScope] = field(default_factory=dict)


def _copy(event: MemoryEvent, scope: MemoryScope, session_id: str, why: str) -> MemoryEvent:
    digest = hashlib.sha256(f"{event.event_id}\x00{scope.key}\x00{why}".encode()).hexdigest()
    return event.model_copy(update={
        "event_id": f"nb-{digest[:32]}", "run_id": scope.run_id,
        "user_id": scope.persona_id, "agent_id": scope.agent_id or event.agent_id,
        "session_id": session_id,
        "metadata": {**(event.metadata or {}), "moved_from": event.scope().key,
                     "moved_event_id": event.event_id},
    })


@dataclass
class Plan:
    """What a migration queues: copies under new scopes; per shared old scope, the owner's
    copies to queue after emptying it (``refile``) or, when an earlier run emptied it and
    stopped part-way, the copies it did not queue yet (``resume``: no second emptying)."""

    result: Migration
    moves: list[MemoryEvent]
    refile: dict[str, list[MemoryEvent]]
    resume: dict[str, list[MemoryEvent]]


def plan(outbox: Outbox, memory: MemoryConfig, provider: str) -> Plan:
    """Which turns move where; nothing is queued."""
    result = Migration()
    rows = outbox.rows(provider)
    forgotten = outbox.forgotten()  # a forget is a fact: its turns are never filed back
    known = {row["event_id"]: float(row["enqueued_at"]) for row in rows}
    moves: list[MemoryEvent] = []
    staying: dict[str, list[tuple[MemoryEvent, MemoryScope, str]]] = defaultdict(list)
    for row in rows:
        event = MemoryEvent.model_validate_json(row["payload"])
        meta = event.metadata or {}
        if meta.get("moved_from") is not None:
            continue  # a copy an earlier run made
        channel, chat_id = meta.get("channel"), meta.get("chat_id")
        sender, session_key = meta.get("sender_id"), meta.get("session_key")
        if not (isinstance(channel, str) and isinstance(chat_id, str)
                and isinstance(session_key, str)):
            result.unreadable += 1
            continue
        if (not isinstance(sender, str) or not is_person(sender, None, session_key)
                or service_account(channel, sender)):
            result.no_person += 1
            continue
        try:
            scope, session_id = chat_scope(memory, channel=channel, chat_id=chat_id,
                                           sender_id=sender, session_key=session_key)
        except ValueError:
            result.unreadable += 1
            continue
        old_key = event.scope().key
        result._scopes[old_key] = event.scope()
        if scope.key == old_key:
            result.unchanged += 1
            staying[old_key].append((event, scope, session_id))
            continue
        result.old_scopes[old_key].add(scope.key)
        moved = _copy(event, scope, session_id, "moved")
        if event.timestamp.timestamp() <= forgotten.get(scope.key, float("-inf")):
            result.forgotten += 1
            continue
        if moved.event_id in known:
            result.already += 1
        else:
            result.moved += 1
            moves.append(moved)
    refile: dict[str, list[MemoryEvent]] = {}
    resume: dict[str, list[MemoryEvent]] = {}
    for old in result.old_scopes:
        pairs = [(e, _copy(e, s, sid, "refiled")) for e, s, sid in staying.get(old, ())]
        done = [known[c.event_id] for _, c in pairs if c.event_id in known]
        if not done:  # never emptied (or emptied and nothing queued: emptying again is safe)
            if pairs:
                refile[old] = result.shared[old] = [c for _, c in pairs]
            continue
        # Emptied when its first copy was queued: the owner's turns queued before that are
        # gone from the backend unless their copy was queued; later turns were stored there
        # after the emptying and need no copy.
        emptied_at = min(done)
        missing = [c for e, c in pairs if c.event_id not in known
                   and known.get(e.event_id, emptied_at) < emptied_at]
        if missing:
            resume[old] = result.shared[old] = missing
            result.resumed.append(old)
    return Plan(result, moves, refile, resume)


async def migrate(outbox: Outbox, memory: MemoryConfig, provider: str, *,
                  dry_run: bool = False, adapter: MemoryAdapter | None = None) -> Migration:
    """Queue every turn recorded under an old scope name under its person's scope. With
    ``adapter`` (``reset_shared``), empty each shared old scope first and queue its
    owner's turns into it again; without, shared scopes are only reported."""
    todo = plan(outbox, memory, provider)
    result = todo.result
    if dry_run:
        return result
    for event in todo.moves:
        if not outbox.enqueue(provider, event, str((event.metadata or {}).get("session_key"))):
            # forgotten since the plan was made: the outbox refuses the copy
            result.moved -= 1
            result.forgotten += 1
    # An earlier run emptied these and stopped part-way: their owner's turns are missing
    # from the backend until queued, so this needs no --reset-shared (nothing is deleted).
    for copies in todo.resume.values():
        result.refiled += _queue(outbox, provider, copies)
    if adapter is None:
        return result
    for old, copies in todo.refile.items():
        await adapter.reset_scope(result._scopes[old])
        result.reset.append(old)
        result.refiled += _queue(outbox, provider, copies)
    return result


def _queue(outbox: Outbox, provider: str, events: list[MemoryEvent]) -> int:
    return sum(outbox.enqueue(provider, event, str((event.metadata or {}).get("session_key")))
               for event in events)
